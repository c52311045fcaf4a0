-- Next-edit suggestions from dg/nextEdit, shown as a diff overlay in the buffer.
--
-- After a pause following a change in normal mode (TextChanged, which includes undo, paste and
-- `cw`) or when insert mode ends, the plugin asks the server for the edits the change implies.
-- Each edit is drawn in place: the text it replaces struck through (DgLspNextEditDelete), the
-- new text as virtual text right after it (DgLspNextEditAdd, inline; further lines below). The
-- accept key applies every edit, the dismiss key hides them; any other change hides them too.
-- When nothing is shown, both keys do what they did before.

local util = require("dg_lsp.util")

local M = {}

local ns = vim.api.nvim_create_namespace("dg_lsp_next_edit")
M.ns = ns

local CANCELLED = -32800

local opts = vim.deepcopy(require("dg_lsp.config").defaults.next_edit)
local group = nil

local state = {
  timer = nil, ---@type uv.uv_timer_t|nil
  seq = 0, -- the newest request; answers to older ones are dropped
  request = nil, ---@type {client: vim.lsp.Client, id: integer}|nil
  shown = nil, ---@type {bufnr: integer, edits: table[], confidence: number, tick: integer, encoding: string}|nil
  own_tick = nil, -- changedtick of our own accept, which must not start a new request at once
  insert_tick = {}, -- per buffer: changedtick when insert mode began
}

local function emit(data)
  vim.api.nvim_exec_autocmds("User", { pattern = "DgLspNextEdit", modeline = false, data = data })
end

local function stop_timer()
  util.stop_timer(state.timer)
end

local function cancel()
  util.cancel_pending(state)
end

--- Hide the suggestion (the buffer is not changed).
function M.clear()
  util.clear_shown(state, "shown", ns)
end

--- Whether a suggestion is shown in the current buffer.
function M.visible()
  local s = state.shown
  return s ~= nil and s.bufnr == vim.api.nvim_get_current_buf() and vim.api.nvim_buf_is_valid(s.bufnr)
    and vim.b[s.bufnr].changedtick == s.tick
end

--- What is shown ({ bufnr, edits, confidence }) or nil.
function M.current()
  local s = state.shown
  return s and { bufnr = s.bufnr, edits = vim.deepcopy(s.edits), confidence = s.confidence } or nil
end

local function draw(bufnr, edits, enc)
  vim.api.nvim_buf_clear_namespace(bufnr, ns, 0, -1)
  for _, e in ipairs(edits) do
    local srow, scol = util.to_byte(bufnr, e.range.start, enc)
    local erow, ecol = util.to_byte(bufnr, e.range["end"], enc)
    if srow ~= erow or scol ~= ecol then
      vim.api.nvim_buf_set_extmark(bufnr, ns, srow, scol, { end_row = erow, end_col = ecol, hl_group = opts.delete_hl })
    end
    local new = vim.split(e.newText or "", "\n", { plain = true })
    local mark = { hl_mode = "combine" }
    if new[1] ~= "" then
      mark.virt_text = { { new[1], opts.add_hl } }
      mark.virt_text_pos = "inline"
    end
    if #new > 1 then
      mark.virt_lines = {}
      for i = 2, #new do
        table.insert(mark.virt_lines, { { new[i] ~= "" and new[i] or " ", opts.add_hl } })
      end
    end
    if mark.virt_text or mark.virt_lines then
      vim.api.nvim_buf_set_extmark(bufnr, ns, erow, ecol, mark)
    end
  end
end

--- Show a dg/nextEdit answer in a buffer; returns true when something is shown.
function M.show(bufnr, result, client)
  if type(result) ~= "table" or type(result.edits) ~= "table" or #result.edits == 0 then
    return false
  end
  local enc = util.encoding(client)
  local ok = pcall(draw, bufnr, result.edits, enc)
  if not ok then
    vim.api.nvim_buf_clear_namespace(bufnr, ns, 0, -1)
    return false -- a range outside the buffer: the answer is for another version of it
  end
  state.shown = { bufnr = bufnr, edits = result.edits, confidence = result.confidence,
    tick = vim.b[bufnr].changedtick, encoding = enc, client_id = client.id }
  return true
end

--- Ask the server for the next edit at the cursor of the current buffer.
---@param invoked boolean|nil true when the user asked (says so when nothing is suggested)
function M.request(invoked)
  local bufnr = vim.api.nvim_get_current_buf()
  local client = util.client(bufnr)
  if not client then
    if invoked then
      util.notify("no dg-lsp client is attached to this buffer", vim.log.levels.WARN)
    end
    return false
  end
  stop_timer()
  cancel()
  local seq = state.seq
  local params = vim.lsp.util.make_position_params(0, util.encoding(client))
  local tick = vim.b[bufnr].changedtick
  local ok, id = client:request("dg/nextEdit", params, function(err, result)
    if seq ~= state.seq then
      return
    end
    state.request = nil
    if err then
      if err.code ~= CANCELLED and invoked then
        util.notify("next edit failed: " .. tostring(err.message or vim.inspect(err)), vim.log.levels.WARN)
      end
      emit({ status = err.code == CANCELLED and "cancelled" or "error", bufnr = bufnr, error = err })
      return
    end
    if not vim.api.nvim_buf_is_valid(bufnr) or vim.b[bufnr].changedtick ~= tick then
      emit({ status = "stale", bufnr = bufnr })
      return
    end
    if result == nil or result == vim.NIL or not M.show(bufnr, result, client) then
      if invoked then
        util.notify("no next edit to suggest here", vim.log.levels.INFO)
      end
      emit({ status = "empty", bufnr = bufnr })
      return
    end
    emit({ status = "shown", bufnr = bufnr, edits = result.edits, confidence = result.confidence })
  end, bufnr)
  if ok and id then
    state.request = { client = client, id = id }
  end
  return ok
end

--- Apply the shown suggestion; returns whether there was one.
function M.accept()
  if not M.visible() then
    return false
  end
  local s = state.shown
  M.clear()
  local edits = {}
  for _, e in ipairs(s.edits) do
    table.insert(edits, { range = e.range, newText = e.newText })
  end
  vim.lsp.util.apply_text_edits(edits, s.bufnr, s.encoding)
  state.own_tick = vim.b[s.bufnr].changedtick
  emit({ status = "accepted", bufnr = s.bufnr, edits = edits })
  return true
end

--- Hide the shown suggestion; returns whether there was one.
function M.dismiss()
  stop_timer()
  cancel()
  if not M.visible() then
    M.clear()
    return false
  end
  local bufnr = state.shown.bufnr
  M.clear()
  emit({ status = "dismissed", bufnr = bufnr })
  return true
end

local function feed(lhs)
  vim.api.nvim_feedkeys(vim.keycode(lhs), "n", false)
end

--- Buffer-local normal-mode keys; without a suggestion a key does what it did before.
function M.map_keys(bufnr)
  local keys = opts.keys or {}
  for name, fn in pairs({ accept = M.accept, dismiss = M.dismiss }) do
    local lhs = keys[name]
    if type(lhs) == "string" and lhs ~= "" then
      vim.keymap.set("n", lhs, function()
        if not fn() then
          feed(lhs)
        end
      end, { buffer = bufnr, desc = "dg-lsp: " .. name .. " the suggested edit", silent = true })
    end
  end
end

-- Automatic requests: on unless the option or the buffer's b:dg_lsp_next_edit says otherwise.
local function auto(bufnr)
  return opts.enabled and vim.b[bufnr].dg_lsp_attached == true and vim.b[bufnr].dg_lsp_next_edit ~= false
end

local function schedule(bufnr)
  util.debounce(state, opts.debounce, function()
    if vim.api.nvim_get_current_buf() == bufnr and auto(bufnr) then
      M.request(false)
    end
  end)
end

local function on_change(args)
  local bufnr = args.buf
  if state.shown and state.shown.bufnr == bufnr then
    M.clear()
  end
  if state.own_tick and state.own_tick == vim.b[bufnr].changedtick then
    state.own_tick = nil
    return
  end
  if auto(bufnr) then
    cancel()
    schedule(bufnr)
  end
end

function M.attach(bufnr)
  M.map_keys(bufnr)
end

function M.setup(next_opts)
  opts = vim.tbl_deep_extend("force", opts, next_opts or {})
  local function highlights()
    -- A link would drop the strikethrough (nvim_set_hl ignores attributes next to `link`).
    vim.api.nvim_set_hl(0, "DgLspNextEditDelete", { strikethrough = true, default = true })
    vim.api.nvim_set_hl(0, "DgLspNextEditAdd", { link = "DiffAdd", default = true })
  end
  highlights()
  group = vim.api.nvim_create_augroup("dg_lsp_next_edit", { clear = true })
  vim.api.nvim_create_autocmd("TextChanged", { group = group, callback = on_change })
  vim.api.nvim_create_autocmd("InsertEnter", {
    group = group,
    callback = function(args)
      state.insert_tick[args.buf] = vim.b[args.buf].changedtick
    end,
  })
  vim.api.nvim_create_autocmd("InsertLeave", {
    group = group,
    callback = function(args)
      local changed = vim.b[args.buf].changedtick ~= state.insert_tick[args.buf]
      if changed and auto(args.buf) then
        schedule(args.buf)
      end
    end,
  })
  vim.api.nvim_create_autocmd("TextChangedI", {
    group = group,
    callback = function(args)
      if state.shown and state.shown.bufnr == args.buf then
        M.clear()
      end
    end,
  })
  vim.api.nvim_create_autocmd("BufLeave", { group = group, callback = function() M.dismiss() end })
  vim.api.nvim_create_autocmd("ColorScheme", { group = group, callback = highlights })
end

return M
