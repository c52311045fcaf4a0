-- dg-lsp for Neovim: configures and enables the dg-lsp language server (Neovim 0.11+ API),
-- ghost text, refining drafts, the :Dg* commands and a statusline component.
--
--   require("dg_lsp").setup({ python = "~/src/dg-lsp/.venv/bin/python", model = "embedded" })
--
-- See :help dg_lsp.

local config = require("dg_lsp.config")
local util = require("dg_lsp.util")

local M = {}

--- The resolved options of the last setup() call (nil before setup).
M.options = nil

--- Why the server cannot be started ({ program, fix }), or nil.
M.cmd_problem = nil

local function nonempty(t)
  if type(t) == "table" and next(t) == nil then
    return vim.empty_dict()
  end
  return t
end

local function capabilities(extra)
  local caps = vim.lsp.protocol.make_client_capabilities()
  -- This plugin handles textDocument/inlineCompletion itself on versions without native support.
  caps.textDocument = caps.textDocument or {}
  caps.textDocument.inlineCompletion = caps.textDocument.inlineCompletion or { dynamicRegistration = false }
  caps.workspace = caps.workspace or {}
  caps.workspace.applyEdit = true
  return vim.tbl_deep_extend("force", caps, extra or {})
end

--- The table given to vim.lsp.config("dg_lsp", ...).
---@param opts table resolved options
---@return vim.lsp.Config
function M.lsp_config(opts)
  local status = require("dg_lsp.status")
  local draft = require("dg_lsp.draft")
  local started = {}
  return {
    cmd = config.server_cmd(opts),
    cmd_env = opts.cmd_env,
    cmd_cwd = opts.cmd_cwd,
    filetypes = opts.filetypes,
    root_markers = opts.root_markers,
    init_options = nonempty(vim.deepcopy(opts.settings)),
    settings = { dgLsp = nonempty(vim.deepcopy(opts.settings)) },
    capabilities = capabilities(opts.capabilities),
    handlers = {
      ["dg/status"] = status.on_status,
      ["dg/draft"] = draft.on_draft,
    },
    on_init = function(client)
      started[client.id] = true
    end,
    on_attach = opts.on_attach,
    on_exit = function(code, signal, client_id)
      if code ~= 0 and not started[client_id] then
        vim.schedule(function()
          util.notify(
            string.format(
              "the server exited (code %s, signal %s) before it was initialized. Run :checkhealth dg_lsp, "
                .. "and see :lua vim.cmd.edit(vim.lsp.get_log_path()) for its output.",
              tostring(code),
              tostring(signal)
            ),
            vim.log.levels.ERROR
          )
        end)
      end
      status.last[client_id] = nil
    end,
  }
end

--- Configure and enable the server. See :help dg_lsp-setup for the options.
---@param user table|nil
function M.setup(user)
  if not (vim.lsp and type(vim.lsp.config) ~= "nil" and type(vim.lsp.enable) == "function") then
    vim.notify("dg-lsp: Neovim 0.11 or newer is needed (vim.lsp.config / vim.lsp.enable)", vim.log.levels.ERROR)
    return
  end
  local opts = config.resolve(user)
  M.options = opts

  require("dg_lsp.inline").setup(opts.ghost)
  require("dg_lsp.next_edit").setup(opts.next_edit)
  require("dg_lsp.draft").setup({ hl = opts.ghost.draft_hl, max_lines = opts.ghost.draft_max_lines })
  if opts.commands then
    require("dg_lsp.commands").setup(opts)
  end

  local group = vim.api.nvim_create_augroup("dg_lsp", { clear = true })
  vim.api.nvim_create_autocmd("LspAttach", {
    group = group,
    callback = function(args)
      local client = vim.lsp.get_client_by_id(args.data.client_id)
      if client and client.name == config.name then
        require("dg_lsp.inline").attach(args.buf, client)
        require("dg_lsp.next_edit").attach(args.buf)
      end
    end,
  })
  vim.api.nvim_create_autocmd("LspDetach", {
    group = group,
    callback = function(args)
      local client = vim.lsp.get_client_by_id(args.data.client_id)
      if client and client.name == config.name then
        require("dg_lsp.inline").detach(args.buf)
      end
    end,
  })

  vim.lsp.config(config.name, M.lsp_config(opts))

  local ok, program, fix = config.check_cmd(opts)
  if not ok then
    M.cmd_problem = { program = program, fix = fix }
    vim.notify(
      string.format("dg-lsp: the server cannot be started: `%s` was not found or is not executable.\nFix: %s", program, fix),
      vim.log.levels.ERROR
    )
    return
  end
  M.cmd_problem = nil
  vim.lsp.enable(config.name)
end

--- The dg_lsp client attached to a buffer (default: current), or nil.
function M.client(bufnr)
  return util.client(bufnr or 0)
end

--- A short statusline string ("DG loading", "DG 42 ms", "DG error"; "" when not attached).
function M.statusline()
  return require("dg_lsp.status").statusline()
end

--- The last dg/status notification ({ state, message, lastLatencyMs }) for the current buffer.
function M.status()
  return require("dg_lsp.status").get(0)
end

--- Ghost text: ask now, accept all, accept one line, dismiss, cycle through candidates.
function M.trigger()
  return require("dg_lsp.inline").trigger()
end

function M.accept()
  return require("dg_lsp.inline").accept()
end

function M.accept_line()
  return require("dg_lsp.inline").accept_line()
end

function M.dismiss()
  return require("dg_lsp.inline").dismiss()
end

--- Show the next (or, with -1, the previous) of several candidates.
function M.cycle(step)
  return require("dg_lsp.inline").cycle(step or 1)
end

--- Next-edit suggestions: ask now, apply the shown one, hide it.
function M.next_edit()
  return require("dg_lsp.next_edit").request(true)
end

function M.accept_next_edit()
  return require("dg_lsp.next_edit").accept()
end

function M.dismiss_next_edit()
  return require("dg_lsp.next_edit").dismiss()
end

return M
