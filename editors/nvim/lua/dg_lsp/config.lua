-- Options of require("dg_lsp").setup(): defaults, validation, the server command and the
-- settings object sent to the server (initializationOptions and didChangeConfiguration).

local M = {}

M.name = "dg_lsp"

M.filetypes = {
  "python",
  "javascript",
  "typescript",
  "javascriptreact",
  "typescriptreact",
  "rust",
  "go",
  "c",
  "cpp",
  "java",
  "markdown",
}

M.root_markers = {
  "pyproject.toml",
  "setup.py",
  "setup.cfg",
  "package.json",
  "tsconfig.json",
  "Cargo.toml",
  "go.mod",
  "pom.xml",
  "build.gradle",
  "CMakeLists.txt",
  "compile_commands.json",
  "Makefile",
  ".git",
}

-- Server settings (the `dgLsp` section). They may be given in `settings = {...}` or, for
-- convenience, at the top level of the setup table (`setup({ model = "..." })`).
M.setting_keys = {
  "model",
  "device",
  "dtype",
  "quantization",
  "threads",
  "canvasLength",
  "maxSteps",
  "entropyBound",
  "leadBeam",
  "candidates",
  "contextBudget",
  "crossFileContext",
  "languages",
  "holeMarkers",
  "inline",
  "drafts",
  "confidence",
  "syntaxRepair",
  "repairRounds",
  "variableLength",
  "jointHoles",
  "nextEdit",
  "adapter",
}

M.defaults = {
  -- How to start the server. `cmd` wins over `python`; with neither, `dg-lsp serve` from $PATH.
  cmd = nil, -- e.g. { "dg-lsp", "serve" } or { "/path/to/.venv/bin/dg-lsp", "serve", "--model", "..." }
  python = nil, -- e.g. "~/src/dg-lsp/.venv/bin/python": runs `<python> -m dg_lsp serve`
  cmd_env = nil, -- extra environment for the server process
  cmd_cwd = nil, -- working directory of the server process (default: Neovim's)
  filetypes = M.filetypes,
  root_markers = M.root_markers,
  settings = {}, -- server settings, see :help dg_lsp-settings
  capabilities = nil, -- merged into the client capabilities
  on_attach = nil, -- function(client, bufnr)
  ghost = {
    enabled = true, -- request ghost text automatically on typing pauses in insert mode
    native = "auto", -- use vim.lsp.inline_completion (Neovim 0.12+) when it exists
    debounce = 150, -- milliseconds of typing pause before a request
    hl = "DgLspGhost",
    draft_hl = "DgLspDraft", -- refining drafts (dg/draft notifications, server setting `drafts`)
    draft_max_lines = 8,
    keys = {
      accept = "<M-l>",
      accept_line = "<M-j>",
      next = "<M-]>", -- the next of several candidates (server setting `candidates`)
      prev = "<M-[>",
      dismiss = "<M-h>",
      trigger = "<M-\\>",
    },
  },
  next_edit = {
    enabled = true, -- ask for the edit a change implies after a pause in normal mode
    debounce = 300, -- milliseconds after the change
    delete_hl = "DgLspNextEditDelete", -- the text an edit replaces (struck through)
    add_hl = "DgLspNextEditAdd", -- the text it writes (virtual text)
    keys = { accept = "<Tab>", dismiss = "<Esc>" }, -- normal mode; pass through when nothing is shown
  },
  commands = true, -- define the :Dg* user commands
  notify_applied = true, -- say so when a DG command changed the buffer
}

local function expand(path)
  if type(path) ~= "string" or path == "" then
    return path
  end
  return vim.fs.normalize(path)
end

--- Merge the user's table into the defaults and validate it.
---@param user table|nil
---@return table
function M.resolve(user)
  user = vim.deepcopy(user or {})
  vim.validate("opts", user, "table")
  local settings = user.settings or {}
  vim.validate("opts.settings", settings, "table")
  for _, key in ipairs(M.setting_keys) do
    if user[key] ~= nil then
      if settings[key] == nil then
        settings[key] = user[key]
      end
      user[key] = nil
    end
  end
  user.settings = settings
  local opts = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), user)
  -- Lists replace the defaults instead of merging into them by index.
  for _, key in ipairs({ "filetypes", "root_markers", "cmd" }) do
    if user[key] ~= nil then
      opts[key] = user[key]
    end
  end
  if user.settings.languages ~= nil then
    opts.settings.languages = user.settings.languages
  end
  if user.settings.holeMarkers ~= nil then
    opts.settings.holeMarkers = user.settings.holeMarkers
  end
  if user.ghost and user.ghost.keys then
    opts.ghost.keys = vim.tbl_extend("force", M.defaults.ghost.keys, user.ghost.keys)
  end
  if user.next_edit and user.next_edit.keys then
    opts.next_edit.keys = vim.tbl_extend("force", M.defaults.next_edit.keys, user.next_edit.keys)
  end

  vim.validate("opts.cmd", opts.cmd, { "table", "string", "function" }, true)
  vim.validate("opts.python", opts.python, "string", true)
  vim.validate("opts.filetypes", opts.filetypes, "table")
  vim.validate("opts.root_markers", opts.root_markers, "table")
  vim.validate("opts.on_attach", opts.on_attach, "function", true)
  vim.validate("opts.ghost.debounce", opts.ghost.debounce, "number")
  vim.validate("opts.next_edit.debounce", opts.next_edit.debounce, "number")
  if type(opts.cmd) == "string" then
    opts.cmd = { opts.cmd }
  end
  if type(opts.settings.model) == "string" and opts.settings.model:find("[/~]") then
    opts.settings.model = expand(opts.settings.model)
  end
  opts.python = expand(opts.python)
  return opts
end

--- The command line that starts the server.
---@param opts table resolved options
---@return string[]|function
function M.server_cmd(opts)
  if type(opts.cmd) == "function" then
    return opts.cmd
  end
  if opts.cmd then
    local cmd = vim.deepcopy(opts.cmd)
    cmd[1] = expand(cmd[1])
    return cmd
  end
  if opts.python then
    return { opts.python, "-m", "dg_lsp", "serve" }
  end
  return { "dg-lsp", "serve" }
end

--- Whether the server's executable exists; returns (ok, program, fix).
---@param opts table resolved options
---@return boolean, string|nil, string|nil
function M.check_cmd(opts)
  local cmd = M.server_cmd(opts)
  if type(cmd) == "function" then
    return true, nil, nil
  end
  local program = cmd[1]
  if type(program) ~= "string" or program == "" then
    return false, tostring(program), "set `cmd = { \"dg-lsp\", \"serve\" }` or `python = \"/path/to/python\"`"
  end
  if vim.fn.executable(program) == 1 then
    return true, vim.fn.exepath(program), nil
  end
  local fix
  if opts.python then
    fix = "`python` must be an interpreter with dg-lsp installed (`python -m pip install -e .` in the dg-lsp "
      .. "repository); set it to e.g. `python = \"~/src/dg-lsp/.venv/bin/python\"`"
  elseif opts.cmd then
    fix = "check `cmd` in require(\"dg_lsp\").setup(): give the full path of the program"
  else
    fix = "install the server (`pip install -e .` in the dg-lsp repository, which provides `dg-lsp`) and put it "
      .. "on $PATH, or pass `python = \"/path/to/venv/bin/python\"` or `cmd = { \"/path/to/dg-lsp\", \"serve\" }` "
      .. "to require(\"dg_lsp\").setup()"
  end
  return false, program, fix
end

return M
