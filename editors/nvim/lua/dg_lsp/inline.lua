-- Ghost text from textDocument/inlineCompletion.
--
-- On Neovim 0.12+ `vim.lsp.inline_completion` does this natively and is used when it exists
-- (option ghost.native = "auto"). On 0.11 this module does it: after a typing pause in insert
-- mode it requests an inline completion at the cursor (cancelling the previous request), shows
-- the first item as virtual text (inline for the rest of the current line, virt_lines below),
-- clears it when the cursor moves or insert mode ends, and inserts it on the accept keys. With
-- several candidates (server setting `candidates`) the next and previous keys cycle through them.
-- `trigger()` asks at once; it always uses this module's own path, on every version.

local util = require("dg_lsp.util")

local M = {}

local ns = vim.api.nvim_create_namespace("dg_lsp_ghost")
M.ns = ns

local INVOKED, AUTOMATIC = 1, 2
local CANCELLED = -32800

local opts = vim.deepcopy(require("dg_lsp.config").defaults.ghost)
local group = nil

local state = {
  timer = nil, ---@type uv.uv_timer_t|nil
  seq = 0, -- number of the newest request; answers to older ones are dropped
  request = nil, ---@type {client: vim.lsp.Client, id: integer, bufnr: integer}|nil
  ghost = nil, ---@type table|nil what is shown now
  skip_tick = nil, -- changedtick of our own partial accept, which must not clear the rest
}

local function emit(data)
  vim.api.nvim_exec_autocmds("User", { pattern = "DgLspInline", modeline = false, data = data })
end

local function cursor()
  local pos = vim.api.nvim_win_get_cursor(0)
  return pos[1] - 1, pos[2]
end

local function in_insert()
  local mode = vim.api.nvim_get_mode().mode
  return mode:sub(1, 1) == "i" or mode:sub(1, 1) == "R"
end

local function native_available()
  local ic = vim.lsp.inline_completion
  return type(ic) == "table" and type(ic.enable) == "function" and type(ic.get) == "function"
end

--- Whether the buffer's ghost text comes from vim.lsp.inline_completion.
function M.uses_native(bufnr)
  return vim.b[bufnr or 0].dg_lsp_native == true
end

--- Cancel the request in flight, if any.
function M.cancel()
  util.cancel_pending(state)
end

local function stop_timer()
  util.stop_timer(state.timer)
end

--- Remove the ghost text (the request in flight stays).
function M.clear()
  util.clear_shown(state, "ghost", ns)
end

--- Remove the ghost text and cancel everything pending.
function M.dismiss()
  stop_timer()
  M.cancel()
  M.clear()
end

--- Whether ghost text is shown in the current buffer.
function M.visible()
  local g = state.ghost
  return g ~= nil and g.bufnr == vim.api.nvim_get_current_buf() and vim.api.nvim_buf_is_valid(g.bufnr)
end

--- What is shown: { bufnr, text (the item's insertText), range, display (the part shown),
--- row, col (0-based anchor, bytes), encoding, client_id }, or nil.
function M.current()
  if not state.ghost then
    return nil
  end
  local g = state.ghost
  return {
    bufnr = g.bufnr,
    text = g.text,
    range = vim.deepcopy(g.range),
    display = g.display,
    row = g.row,
    col = g.col,
    encoding = g.encoding,
    client_id = g.client_id,
  }
end

local function expand_tabs(s)
  if not s:find("\t", 1, true) then
    return s
  end
  return (s:gsub("\t", string.rep(" ", vim.bo.tabstop > 0 and vim.bo.tabstop or 8)))
end

local function draw(bufnr, row, col, display)
  vim.api.nvim_buf_clear_namespace(bufnr, ns, 0, -1)
  local lines = vim.split(display, "\n", { plain = true })
  local mark = { hl_mode = "combine", right_gravity = false }
  if lines[1] ~= "" then
    mark.virt_text = { { expand_tabs(lines[1]), opts.hl } }
    mark.virt_text_pos = "inline"
  end
  if #lines > 1 then
    local virt_lines = {}
    for i = 2, #lines do
      table.insert(virt_lines, { { expand_tabs(lines[i]) ~= "" and expand_tabs(lines[i]) or " ", opts.hl } })
    end
    mark.virt_lines = virt_lines
  end
  return vim.api.nvim_buf_set_extmark(bufnr, ns, row, col, mark)
end

--- Show an item as ghost text. `item` is an InlineCompletionItem; returns true when shown.
---@param bufnr integer
---@param item table
---@param client vim.lsp.Client
function M.show(bufnr, item, client)
  local text = item.insertText
  if type(text) == "table" then -- StringValue (snippet): show and insert its value
    text = text.value
  end
  if type(text) ~= "string" or text == "" then
    return false
  end
  local enc = util.encoding(client)
  local range = item.range
  if not range then
    local row, col = cursor()
    local pos = util.to_lsp(bufnr, row, col, enc)
    range = { start = pos, ["end"] = pos }
  end
  local srow, scol = util.to_byte(bufnr, range.start, enc)
  local erow, ecol = util.to_byte(bufnr, range["end"], enc)
  -- The item replaces [start, end); it can be shown as ghost text only when it starts with
  -- what is already there (the word typed so far), and the rest is what appears.
  local ok, covered = pcall(vim.api.nvim_buf_get_text, bufnr, srow, scol, erow, ecol, {})
  if not ok then
    return false -- a range outside the buffer: the answer is for another version of it
  end
  local existing = table.concat(covered, "\n")
  if text:sub(1, #existing) ~= existing or #text == #existing then
    return false
  end
  local display = text:sub(#existing + 1)
  M.clear()
  require("dg_lsp.draft").clear(bufnr)
  local mark = draw(bufnr, erow, ecol, display)
  state.ghost = {
    bufnr = bufnr,
    text = text,
    range = range,
    start_row = srow,
    start_col = scol,
    row = erow,
    col = ecol,
    display = display,
    encoding = enc,
    client_id = client.id,
    mark = mark,
  }
  return true
end

--- Request ghost text at the cursor of the current buffer.
---@param kind integer|nil 1 (invoked, the default) or 2 (automatic)
function M.request(kind)
  kind = kind or INVOKED
  local bufnr = vim.api.nvim_get_current_buf()
  local client = util.client(bufnr)
  if not client then
    if kind == INVOKED then
      util.notify("no dg-lsp client is attached to this buffer", vim.log.levels.WARN)
    end
    emit({ status = "no-client", bufnr = bufnr })
    return false
  end
  stop_timer()
  M.cancel()
  local seq = state.seq
  local enc = util.encoding(client)
  local params = vim.lsp.util.make_position_params(0, enc)
  params.context = { triggerKind = kind }
  local tick = vim.b[bufnr].changedtick
  local row, col = cursor()
  local ok, id = client:request("textDocument/inlineCompletion", params, function(err, result)
    if seq ~= state.seq then
      return -- a newer request replaced this one
    end
    state.request = nil
    if err then
      if err.code ~= CANCELLED and kind == INVOKED then
        util.notify("inline completion failed: " .. tostring(err.message or vim.inspect(err)), vim.log.levels.WARN)
      end
      emit({ status = err.code == CANCELLED and "cancelled" or "error", bufnr = bufnr, kind = kind, error = err })
      return
    end
    local crow, ccol = cursor()
    if
      not vim.api.nvim_buf_is_valid(bufnr)
      or vim.api.nvim_get_current_buf() ~= bufnr
      or vim.b[bufnr].changedtick ~= tick
      or crow ~= row
      or ccol ~= col
    then
      emit({ status = "stale", bufnr = bufnr, kind = kind })
      return
    end
    local items = type(result) == "table" and (result.items or result) or {}
    local item = items[1]
    if not item then
      emit({ status = "empty", bufnr = bufnr, kind = kind })
      return
    end
    if M.show(bufnr, item, client) then
      state.ghost.items, state.ghost.index = items, 1
      emit({ status = "shown", bufnr = bufnr, kind = kind, item = item, count = #items })
    else
      emit({ status = "not-shown", bufnr = bufnr, kind = kind, item = item })
    end
  end, bufnr)
  if ok and id then
    state.request = { client = client, id = id, bufnr = bufnr }
  end
  return ok
end

--- The texts of every item of the answer shown (several with the server's `candidates`), or {}.
---@return string[]
function M.items()
  local out = {}
  for _, item in ipairs(state.ghost and state.ghost.items or {}) do
    local text = item.insertText
    table.insert(out, type(text) == "table" and text.value or text)
  end
  return out
end

--- Ask for ghost text at the cursor now (ignores the debounce and `ghost.enabled`).
function M.trigger()
  return M.request(INVOKED)
end

--- Show another item of the same answer in place of the one shown: `step` 1 the next, -1 the
--- previous, wrapping around; items that cannot be shown at the cursor are passed over.
---@param step integer
---@return boolean shown
function M.cycle(step)
  local g = state.ghost
  if not M.visible() or not g.items or #g.items < 2 then
    return false
  end
  local client = vim.lsp.get_client_by_id(g.client_id)
  if not client then
    return false
  end
  local items, n = g.items, #g.items
  for k = 1, n - 1 do
    local i = (g.index - 1 + step * k) % n + 1
    if M.show(g.bufnr, items[i], client) then
      state.ghost.items, state.ghost.index = items, i
      emit({ status = "cycled", bufnr = g.bufnr, item = items[i], index = i, count = n })
      return true
    end
  end
  return false
end

local function place_cursor(row, col, lines)
  local end_row = row + #lines - 1
  local end_col = #lines == 1 and col + #lines[1] or #lines[#lines]
  vim.api.nvim_win_set_cursor(0, { end_row + 1, end_col })
end

--- Insert the whole suggestion: the item's insertText replaces its range.
---@return boolean accepted
function M.accept()
  local g = state.ghost
  if not M.visible() then
    return false
  end
  stop_timer()
  M.cancel()
  M.clear()
  local lines = vim.split(g.text, "\n", { plain = true })
  vim.api.nvim_buf_set_text(g.bufnr, g.start_row, g.start_col, g.row, g.col, lines)
  place_cursor(g.start_row, g.start_col, lines)
  emit({ status = "accepted", bufnr = g.bufnr, text = g.text })
  return true
end

--- Insert the suggestion up to the end of its first line (or the next line when it starts with
--- a line break); the rest stays shown.
---@return boolean accepted
function M.accept_line()
  local g = state.ghost
  if not M.visible() then
    return false
  end
  local display = g.display
  local chunk
  if display:sub(1, 1) == "\n" then
    local nl = display:find("\n", 2, true)
    chunk = nl and display:sub(1, nl - 1) or display
  else
    local nl = display:find("\n", 1, true)
    chunk = nl and display:sub(1, nl - 1) or display
  end
  if chunk == display then
    return M.accept()
  end
  stop_timer()
  M.cancel()
  M.clear()
  local rest = display:sub(#chunk + 1)
  local lines = vim.split(chunk, "\n", { plain = true })
  vim.api.nvim_buf_set_text(g.bufnr, g.row, g.col, g.row, g.col, lines)
  place_cursor(g.row, g.col, lines)
  state.skip_tick = vim.b[g.bufnr].changedtick
  local row, col = cursor()
  local client = vim.lsp.get_client_by_id(g.client_id)
  if client then
    local pos = util.to_lsp(g.bufnr, row, col, g.encoding)
    M.show(g.bufnr, { insertText = rest, range = { start = pos, ["end"] = pos } }, client)
  end
  emit({ status = "accepted-line", bufnr = g.bufnr, text = chunk })
  return true
end

-- Keys ------------------------------------------------------------------------------------------

local function feed(lhs)
  vim.api.nvim_feedkeys(vim.keycode(lhs), "n", false)
end

local function native_accept()
  local ok, accepted = pcall(vim.lsp.inline_completion.get)
  return ok and accepted ~= false
end

local function native_select(bufnr, step)
  local select = vim.lsp.inline_completion and vim.lsp.inline_completion.select
  return type(select) == "function" and pcall(select, { bufnr = bufnr, count = step })
end

--- Buffer-local insert-mode keys. When no ghost text is shown, a key does what it did before.
---@param bufnr integer
function M.map_keys(bufnr)
  local keys = opts.keys or {}
  local function map(lhs, fn, desc)
    if type(lhs) == "string" and lhs ~= "" then
      vim.keymap.set("i", lhs, function()
        if not fn() then
          feed(lhs)
        end
      end, { buffer = bufnr, desc = desc, silent = true })
    end
  end
  map(keys.accept, function()
    if M.visible() then
      return M.accept()
    end
    return M.uses_native(bufnr) and native_accept()
  end, "dg-lsp: accept ghost text")
  map(keys.accept_line, function()
    return M.visible() and M.accept_line()
  end, "dg-lsp: accept one line of ghost text")
  for name, step in pairs({ next = 1, prev = -1 }) do
    map(keys[name], function()
      if M.visible() then
        return M.cycle(step)
      end
      return M.uses_native(bufnr) and native_select(bufnr, step)
    end, step > 0 and "dg-lsp: show the next suggestion" or "dg-lsp: show the previous suggestion")
  end
  map(keys.dismiss, function()
    if M.visible() then
      M.dismiss()
      return true
    end
    return false
  end, "dg-lsp: dismiss ghost text")
  map(keys.trigger, function()
    M.trigger()
    return true
  end, "dg-lsp: ask for ghost text now")
end

-- Automatic requests ----------------------------------------------------------------------------

local function auto_enabled(bufnr)
  return opts.enabled and not M.uses_native(bufnr) and vim.b[bufnr].dg_lsp_attached == true
    and vim.b[bufnr].dg_lsp_ghost ~= false
end

local function schedule_request(bufnr)
  util.debounce(state, opts.debounce, function()
    if vim.api.nvim_get_current_buf() == bufnr and in_insert() and auto_enabled(bufnr) then
      M.request(AUTOMATIC)
    end
  end)
end

local function on_text_changed(args)
  local bufnr = args.buf
  if state.skip_tick and state.skip_tick == vim.b[bufnr].changedtick then
    return
  end
  state.skip_tick = nil
  if state.ghost and state.ghost.bufnr == bufnr then
    M.clear()
  end
  if auto_enabled(bufnr) then
    M.cancel()
    schedule_request(bufnr)
  end
end

local function on_cursor_moved(args)
  local g = state.ghost
  if not g or g.bufnr ~= args.buf then
    return
  end
  local row, col = cursor()
  if row ~= g.row or col ~= g.col then
    M.clear()
  end
end

--- Called on LspAttach of the dg_lsp client.
function M.attach(bufnr, client)
  vim.b[bufnr].dg_lsp_attached = true
  local native = opts.native
  if (native == "auto" or native == true) and native_available() then
    local ok = pcall(vim.lsp.inline_completion.enable, true, { bufnr = bufnr, client_id = client.id })
    vim.b[bufnr].dg_lsp_native = ok
  end
  M.map_keys(bufnr)
end

function M.detach(bufnr)
  vim.b[bufnr].dg_lsp_attached = false
  if state.ghost and state.ghost.bufnr == bufnr then
    M.dismiss()
  end
end

function M.setup(ghost_opts)
  opts = vim.tbl_deep_extend("force", opts, ghost_opts or {})
  vim.api.nvim_set_hl(0, "DgLspGhost", { link = "Comment", default = true })
  group = vim.api.nvim_create_augroup("dg_lsp_inline", { clear = true })
  vim.api.nvim_create_autocmd({ "TextChangedI", "TextChangedP" }, { group = group, callback = on_text_changed })
  vim.api.nvim_create_autocmd("CursorMovedI", { group = group, callback = on_cursor_moved })
  vim.api.nvim_create_autocmd({ "InsertLeave", "BufLeave" }, {
    group = group,
    callback = function()
      M.dismiss()
    end,
  })
  vim.api.nvim_create_autocmd("ColorScheme", {
    group = group,
    callback = function()
      vim.api.nvim_set_hl(0, "DgLspGhost", { link = "Comment", default = true })
    end,
  })
end

return M
