-- :checkhealth dg_lsp

local M = {}

-- Runs `<program> [args] --version`; returns (ok, output or reason).
local function version_of(argv, opts)
  local ok, obj = pcall(function()
    return vim.system(argv, { text = true, env = opts.cmd_env, cwd = opts.cmd_cwd }):wait(30000)
  end)
  if not ok then
    return false, tostring(obj)
  end
  local out = vim.trim((obj.stdout or "") .. "\n" .. (obj.stderr or ""))
  if obj.code ~= 0 then
    local last = out:match("([^\n]*)$") or out
    return false, string.format("exit code %s: %s", tostring(obj.code), last)
  end
  return true, out
end

function M.check()
  local health = vim.health
  local config = require("dg_lsp.config")
  local dg = require("dg_lsp")

  health.start("Neovim")
  local v = vim.version()
  local version = string.format("%d.%d.%d", v.major, v.minor, v.patch)
  if vim.fn.has("nvim-0.11") == 1 then
    health.ok("Neovim " .. version)
  else
    health.error("Neovim " .. version .. ": dg-lsp needs 0.11 or newer (vim.lsp.config / vim.lsp.enable)")
  end
  local ic = vim.lsp.inline_completion
  if type(ic) == "table" and type(ic.enable) == "function" then
    health.ok("ghost text: vim.lsp.inline_completion (native)")
  else
    health.info("ghost text: this plugin's own inlineCompletion client (no vim.lsp.inline_completion in " .. version .. ")")
  end

  health.start("Server command")
  local opts = dg.options
  if not opts then
    health.warn("require('dg_lsp').setup() has not been called", { "Call require('dg_lsp').setup({...}) in your config" })
    opts = config.resolve({})
  end
  local cmd = config.server_cmd(opts)
  if type(cmd) == "function" then
    health.info("cmd is a function; not checked")
  else
    health.info("cmd: " .. table.concat(cmd, " "))
    local ok, program, fix = config.check_cmd(opts)
    if ok then
      health.ok("executable found: " .. program)
      local probe = nil
      if opts.python and not opts.cmd then
        probe = { cmd[1], "-m", "dg_lsp", "--version" }
      elseif vim.fs.basename(cmd[1]) == "dg-lsp" then
        probe = { cmd[1], "--version" }
      end
      if probe then
        local good, out = version_of(probe, opts)
        if good then
          health.ok(string.format("`%s` runs: %s", table.concat(probe, " "), out))
        else
          health.error(string.format("`%s` fails: %s", table.concat(probe, " "), out), {
            "Install the server into that environment: `pip install -e .` in the dg-lsp repository",
          })
        end
      end
    else
      health.error("`" .. tostring(program) .. "` was not found or is not executable", { fix })
    end
  end

  health.start("Client")
  local clients = vim.lsp.get_clients({ name = config.name })
  if #clients == 0 then
    if vim.lsp.is_enabled and vim.lsp.is_enabled(config.name) then
      health.info("enabled, not running: it starts when a buffer of these filetypes is opened: "
        .. table.concat(opts.filetypes, ", "))
    else
      health.warn("the dg_lsp client is neither enabled nor running")
    end
    return
  end
  local status = require("dg_lsp.status")
  for _, client in ipairs(clients) do
    local bufs = vim.tbl_keys(client.attached_buffers or {})
    table.sort(bufs)
    local names = {}
    for _, b in ipairs(bufs) do
      table.insert(names, string.format("%d (%s)", b, vim.fn.fnamemodify(vim.api.nvim_buf_get_name(b), ":~:.")))
    end
    if client:is_stopped() then
      health.error(string.format("client %d is stopping or stopped", client.id))
    else
      health.ok(string.format("client %d running (root %s, position encoding %s); attached to %s",
        client.id, tostring(client.root_dir or client.config.root_dir or "none"), tostring(client.offset_encoding),
        #names > 0 and table.concat(names, ", ") or "no buffers"))
    end
    local last = status.last[client.id]
    if last then
      health.info(string.format("last dg/status: %s %s", tostring(last.state), tostring(last.message or "")))
    end
    if not client:is_stopped() then
      local reply = client:request_sync("workspace/executeCommand", { command = "dg.status", arguments = {} }, 5000, bufs[1] or 0)
      if not reply or reply.err or type(reply.result) ~= "table" then
        health.warn("dg.status did not answer: " .. vim.inspect(reply and reply.err or "timeout"))
      else
        local s = reply.result
        local line = string.format("model %s on %s (%s, quantization %s)", tostring(s.model or "-"),
          tostring(s.device or "-"), tostring(s.dtype or "-"), tostring(s.quantization or "-"))
        if s.state == "ready" then
          health.ok("state ready: " .. line .. (s.message and s.message ~= "" and ("; " .. s.message) or ""))
        elseif s.state == "loading" or s.state == "idle" then
          health.info("state " .. s.state .. ": " .. tostring(s.message or ""))
        else
          health.error("state " .. tostring(s.state) .. ": " .. tostring(s.message or ""),
            { "Check the `model`, `device`, `dtype` and `quantization` settings", "Run `dg-lsp check` in a terminal" })
        end
      end
    end
  end
end

return M
