-- Refining drafts: `dg/draft` notifications ({ uri, position, text, final }) sent while the model
-- denoises (server setting `drafts = true`). The latest draft is shown as virtual text in the
-- DgLspDraft highlight at its position; it never changes the buffer. It disappears when the final
-- notification arrives (the real ghost text or edit follows), when ghost text is shown, when the
-- buffer changes, or when the cursor moves away from where it was (then the rest of that fill's
-- drafts are not shown).

local util = require("dg_lsp.util")

local M = {}

local ns = vim.api.nvim_create_namespace("dg_lsp_draft")
M.ns = ns

local opts = { hl = "DgLspDraft", max_lines = 8 }

-- bufnr -> { row, col, key } of the draft shown; bufnr -> key of a suppressed fill position.
local shown = {}
local suppressed = {}

local function key_of(pos)
  return string.format("%d:%d", pos.line, pos.character)
end

--- Remove the draft shown in a buffer.
function M.clear(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  shown[bufnr] = nil
  if vim.api.nvim_buf_is_valid(bufnr) then
    vim.api.nvim_buf_clear_namespace(bufnr, ns, 0, -1)
  end
end

--- Whether a draft is shown in the buffer; returns its text when so.
function M.get(bufnr)
  local s = shown[bufnr or vim.api.nvim_get_current_buf()]
  return s and s.text or nil
end

local function show(bufnr, row, col, text)
  vim.api.nvim_buf_clear_namespace(bufnr, ns, 0, -1)
  local lines = vim.split(text, "\n", { plain = true })
  local mark = { hl_mode = "combine", right_gravity = false }
  local first = lines[1]:gsub("\t", "    ")
  if first ~= "" then
    mark.virt_text = { { first, opts.hl } }
    mark.virt_text_pos = "inline"
  end
  if #lines > 1 then
    local virt_lines = {}
    local last = math.min(#lines, opts.max_lines)
    for i = 2, last do
      local line = lines[i]:gsub("\t", "    ")
      table.insert(virt_lines, { { line ~= "" and line or " ", opts.hl } })
    end
    if #lines > last then
      table.insert(virt_lines, { { "…", opts.hl } })
    end
    mark.virt_lines = virt_lines
  end
  if mark.virt_text or mark.virt_lines then
    vim.api.nvim_buf_set_extmark(bufnr, ns, row, col, mark)
  end
end

--- Handler for the `dg/draft` notification.
function M.on_draft(_, params, ctx)
  if type(params) ~= "table" or type(params.uri) ~= "string" or type(params.position) ~= "table" then
    return
  end
  local bufnr = vim.uri_to_bufnr(params.uri)
  if not vim.api.nvim_buf_is_loaded(bufnr) then
    return
  end
  local key = key_of(params.position)
  if params.final then
    M.clear(bufnr)
    suppressed[bufnr] = nil
    vim.api.nvim_exec_autocmds("User", { pattern = "DgLspDraft", modeline = false, data = { bufnr = bufnr, final = true } })
    return
  end
  if suppressed[bufnr] == key then
    return
  end
  local ghost = require("dg_lsp.inline").current()
  if ghost and ghost.bufnr == bufnr then
    return -- the real ghost text is already there
  end
  local text = type(params.text) == "string" and params.text or ""
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  local row, col = util.to_byte(bufnr, params.position, util.encoding(client))
  if text == "" then
    M.clear(bufnr)
  else
    show(bufnr, row, col, text)
  end
  local cursor = vim.api.nvim_get_current_buf() == bufnr and vim.api.nvim_win_get_cursor(0) or nil
  shown[bufnr] = { row = row, col = col, key = key, text = text, cursor = cursor }
  vim.api.nvim_exec_autocmds("User", { pattern = "DgLspDraft", modeline = false, data = { bufnr = bufnr, text = text } })
end

function M.setup(draft_opts)
  opts = vim.tbl_deep_extend("force", opts, draft_opts or {})
  local function hl()
    vim.api.nvim_set_hl(0, "DgLspDraft", { link = "NonText", default = true })
  end
  hl()
  local group = vim.api.nvim_create_augroup("dg_lsp_draft", { clear = true })
  vim.api.nvim_create_autocmd("ColorScheme", { group = group, callback = hl })
  vim.api.nvim_create_autocmd({ "TextChanged", "TextChangedI" }, {
    group = group,
    callback = function(args)
      if shown[args.buf] then
        M.clear(args.buf)
      end
    end,
  })
  vim.api.nvim_create_autocmd({ "CursorMoved", "CursorMovedI" }, {
    group = group,
    callback = function(args)
      local s = shown[args.buf]
      if not s then
        return
      end
      local pos = vim.api.nvim_win_get_cursor(0)
      if not s.cursor or pos[1] ~= s.cursor[1] or pos[2] ~= s.cursor[2] then
        suppressed[args.buf] = s.key
        M.clear(args.buf)
      end
    end,
  })
  vim.api.nvim_create_autocmd("BufWipeout", {
    group = group,
    callback = function(args)
      shown[args.buf] = nil
      suppressed[args.buf] = nil
    end,
  })
end

return M
