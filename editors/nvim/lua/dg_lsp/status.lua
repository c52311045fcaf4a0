-- The server's state: the last `dg/status` notification, `dg.status` for :DgStatus, and a
-- statusline component.

local util = require("dg_lsp.util")

local M = {}

--- Last dg/status notification per client id: { state, message, lastLatencyMs, time }.
M.last = {}

--- Handler for the `dg/status` notification.
function M.on_status(_, params, ctx)
  if type(params) ~= "table" then
    return
  end
  local entry = vim.deepcopy(params)
  entry.time = vim.uv.now()
  M.last[ctx.client_id] = entry
  vim.api.nvim_exec_autocmds("User", { pattern = "DgLspStatus", modeline = false, data = entry })
  -- Let statuslines that show us redraw.
  vim.schedule(function()
    pcall(vim.cmd.redrawstatus)
  end)
end

--- The last dg/status notification of the client attached to a buffer (or of any client).
---@param bufnr integer|nil
---@return table|nil
function M.get(bufnr)
  local client = util.client(bufnr) or util.client(nil)
  return client and M.last[client.id] or nil
end

--- A short string for the statusline: "DG loading", "DG 42 ms", "DG error", or "" when no
--- dg-lsp client is attached to the current buffer.
---@return string
function M.statusline()
  local client = util.client(0)
  if not client then
    return ""
  end
  local last = M.last[client.id]
  if not last then
    return "DG starting"
  end
  if last.state == "ready" then
    local ms = tonumber(last.lastLatencyMs)
    return ms and string.format("DG %d ms", math.floor(ms + 0.5)) or "DG ready"
  end
  return "DG " .. tostring(last.state or "?")
end

--- Ask the server for dg.status; calls cb(err, result).
---@param cb fun(err: any, result: table|nil)
---@param bufnr integer|nil
function M.request(cb, bufnr)
  local client = util.client(bufnr or 0) or util.client(nil)
  if not client then
    cb("no dg-lsp client is running", nil)
    return
  end
  client:request("workspace/executeCommand", { command = "dg.status", arguments = {} }, function(err, result)
    cb(err, result)
  end, vim.api.nvim_get_current_buf())
end

local function bytes(n)
  n = tonumber(n)
  if not n then
    return nil
  end
  if n >= 2 ^ 30 then
    return string.format("%.2f GiB", n / 2 ^ 30)
  end
  return string.format("%.1f MiB", n / 2 ^ 20)
end

local function count(n)
  n = tonumber(n)
  if not n then
    return nil
  end
  if n >= 1e9 then
    return string.format("%.2fB", n / 1e9)
  elseif n >= 1e6 then
    return string.format("%.1fM", n / 1e6)
  end
  return tostring(n)
end

--- dg.status as readable lines.
---@param status table
---@return string[]
function M.format(status)
  local lines = {}
  local function add(label, value)
    if value ~= nil and value ~= vim.NIL and value ~= "" then
      table.insert(lines, string.format("%-14s %s", label, tostring(value)))
    end
  end
  add("state", status.state)
  add("message", status.message)
  add("model", status.model)
  add("format", status.format)
  add("device", status.device)
  add("dtype", status.dtype)
  add("quantization", status.quantization)
  add("precision", status.precision)
  add("parameters", count(status.parameters))
  add("memory", bytes(status.memoryBytes))
  add("documents", status.documents)
  add("encoding", status.positionEncoding)
  local latency = status.lastLatencyMs
  if type(latency) == "table" then
    local names = vim.tbl_keys(latency)
    table.sort(names)
    for _, name in ipairs(names) do
      local l = latency[name]
      if type(l) == "table" then
        add("latency " .. name, string.format("last %s ms, median %s ms, %s requests", l.last, l.median, l.count))
      end
    end
  elseif latency ~= nil then
    add("latency", tostring(latency) .. " ms")
  end
  local shown = {
    state = true, message = true, model = true, format = true, device = true, dtype = true,
    quantization = true, precision = true, parameters = true, memoryBytes = true, documents = true,
    positionEncoding = true, lastLatencyMs = true,
  }
  local rest = {}
  for key, value in pairs(status) do
    if not shown[key] and type(value) ~= "table" and value ~= vim.NIL then
      table.insert(rest, key)
    end
  end
  table.sort(rest)
  for _, key in ipairs(rest) do
    add(key, status[key])
  end
  return lines
end

--- :DgStatus
function M.show()
  M.request(function(err, result)
    if err or type(result) ~= "table" then
      local last = M.get(0)
      local text = "dg.status failed: " .. (type(err) == "table" and (err.message or vim.inspect(err)) or tostring(err))
      if last then
        text = text .. string.format("\nlast dg/status: %s %s", last.state, last.message or "")
      end
      util.notify(text, vim.log.levels.ERROR)
      return
    end
    vim.notify("dg-lsp status\n" .. table.concat(M.format(result), "\n"), vim.log.levels.INFO, { title = "dg-lsp" })
  end)
end

return M
