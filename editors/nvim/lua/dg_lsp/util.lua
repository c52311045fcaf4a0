-- Small helpers shared by the modules: finding the client, converting positions.

local M = {}

M.name = "dg_lsp"

--- The dg_lsp client attached to a buffer (or any running one when bufnr is nil).
---@param bufnr integer|nil
---@return vim.lsp.Client|nil
function M.client(bufnr)
  local filter = { name = M.name }
  if bufnr ~= nil then
    filter.bufnr = bufnr == 0 and vim.api.nvim_get_current_buf() or bufnr
  end
  return vim.lsp.get_clients(filter)[1]
end

function M.encoding(client)
  return (client and client.offset_encoding) or "utf-16"
end

local function line_text(bufnr, row)
  return vim.api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ""
end

--- LSP position -> 0-based (row, byte column) in the buffer.
---@param bufnr integer
---@param pos lsp.Position
---@param encoding string
---@return integer, integer
function M.to_byte(bufnr, pos, encoding)
  local line = line_text(bufnr, pos.line)
  if encoding == "utf-8" then
    return pos.line, math.min(pos.character, #line)
  end
  local ok, col = pcall(vim.str_byteindex, line, encoding, pos.character, false)
  if not ok then
    col = #line
  end
  return pos.line, math.min(col, #line)
end

--- 0-based (row, byte column) -> LSP position.
---@param bufnr integer
---@param row integer
---@param col integer
---@param encoding string
---@return lsp.Position
function M.to_lsp(bufnr, row, col, encoding)
  local line = line_text(bufnr, row)
  col = math.min(col, #line)
  if encoding == "utf-8" then
    return { line = row, character = col }
  end
  return { line = row, character = vim.str_utfindex(line, encoding, col, false) }
end

--- Cancel a request in flight ({ client, id } or nil); a stopped client has nothing to cancel.
function M.cancel_request(req)
  if req and not req.client:is_stopped() then
    pcall(req.client.cancel_request, req.client, req.id)
  end
end

--- Cancel the request a feature's state holds and bump its sequence, so that a late answer to it
--- (or to anything sent before) is recognised as stale and dropped.
function M.cancel_pending(state)
  local req = state.request
  state.request = nil
  state.seq = state.seq + 1
  M.cancel_request(req)
end

--- Take what a feature shows out of `state[key]` and clear its extmarks, if its buffer still exists.
function M.clear_shown(state, key, ns)
  local shown = state[key]
  state[key] = nil
  if shown and vim.api.nvim_buf_is_valid(shown.bufnr) then
    vim.api.nvim_buf_clear_namespace(shown.bufnr, ns, 0, -1)
  end
end

--- Run `fn` on the main loop `ms` after the last call (one timer per feature, kept in `state.timer`).
function M.debounce(state, ms, fn)
  if not state.timer then
    state.timer = vim.uv.new_timer()
  end
  state.timer:stop()
  state.timer:start(ms, 0, function()
    vim.schedule(fn)
  end)
end

--- Stop a debounce timer if there is one.
function M.stop_timer(timer)
  if timer then
    timer:stop()
  end
end

function M.notify(msg, level)
  vim.notify("dg-lsp: " .. msg, level or vim.log.levels.INFO, { title = "dg-lsp" })
end

return M
