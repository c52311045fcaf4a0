-- :DgInfill, :DgFillHoles, :DgCompleteBody, :DgRewrite, :DgRewriteParagraph, :DgNextEdit, :DgLearn,
-- :DgStatus.
--
-- The editing commands send one workspace/executeCommand (dg.infill or dg.rewriteParagraph).
-- The server computes the edit and applies it itself with workspace/applyEdit, which Neovim's
-- client handles; the reply says { applied, message, latencyMs }. Each finished command fires
-- `User DgLspCommandDone` with data { command, mode, bufnr, result, err }.

local util = require("dg_lsp.util")

local M = {}

local opts = { notify_applied = true }

local LABELS = {
  fim = "fill in the middle",
  holes = "fill the holes",
  body = "complete the body",
  rewrite = "rewrite",
  paragraph = "rewrite the paragraph",
}

local function message_of(err)
  if type(err) == "table" then
    return err.message or vim.inspect(err)
  end
  return tostring(err)
end

--- Send a dg command for a buffer; cb(err, result) is called with the reply.
---@param command string "dg.infill" | "dg.rewriteParagraph" | ...
---@param arg table the command's single argument
---@param bufnr integer
---@param mode string what to call it in messages (a key of LABELS)
---@param cb fun(err: any, result: any)|nil
function M.execute(command, arg, bufnr, mode, cb)
  local client = util.client(bufnr)
  local label = LABELS[mode] or command
  local function done(err, result)
    if cb then
      pcall(cb, err, result)
    end
    vim.api.nvim_exec_autocmds("User", {
      pattern = "DgLspCommandDone",
      modeline = false,
      data = { command = command, mode = mode, bufnr = bufnr, result = result, err = err },
    })
  end
  if not client then
    local ft = vim.bo[bufnr].filetype
    util.notify(
      string.format("no dg-lsp client is attached to this buffer (filetype %q); see :checkhealth dg_lsp", ft),
      vim.log.levels.ERROR
    )
    done("no client", nil)
    return false
  end
  vim.api.nvim_echo({ { "dg-lsp: " .. label .. "…", "Comment" } }, false, {})
  local ok = client:request("workspace/executeCommand", { command = command, arguments = { arg } }, function(err, result)
    if err then
      util.notify(label .. " failed: " .. message_of(err), vim.log.levels.ERROR)
    elseif type(result) ~= "table" then
      util.notify(label .. ": unexpected reply " .. vim.inspect(result), vim.log.levels.WARN)
    elseif result.applied then
      if opts.notify_applied then
        local ms = tonumber(result.latencyMs)
        util.notify(label .. (ms and string.format(" done (%d ms)", math.floor(ms + 0.5)) or " done"))
      end
    else
      util.notify(label .. ": " .. tostring(result.message or "nothing was changed"), vim.log.levels.WARN)
    end
    done(err, result)
  end, bufnr)
  if not ok then
    util.notify("the dg-lsp client has stopped; restart it with :lua vim.lsp.enable('dg_lsp')", vim.log.levels.ERROR)
    done("client stopped", nil)
  end
  return ok
end

--- The LSP range of a command's range (visual selection or lines), or of the cursor.
---@param bufnr integer
---@param cmd table|nil the user command's opts (line1, line2, range)
---@param encoding string
---@return lsp.Range
function M.range_of(bufnr, cmd, encoding)
  if not cmd or (cmd.range or 0) == 0 then
    local pos = vim.api.nvim_win_get_cursor(0)
    local p = util.to_lsp(bufnr, pos[1] - 1, pos[2], encoding)
    return { start = p, ["end"] = p }
  end
  local line1, line2 = cmd.line1, cmd.line2
  local vs = vim.api.nvim_buf_get_mark(bufnr, "<")
  local ve = vim.api.nvim_buf_get_mark(bufnr, ">")
  local srow, scol, erow, ecol
  if vim.fn.visualmode() == "v" and vs[1] == line1 and ve[1] == line2 and vs[1] > 0 then
    -- A characterwise selection: from its first character to the end of its last one.
    srow, scol = vs[1] - 1, vs[2]
    erow = ve[1] - 1
    local line = vim.api.nvim_buf_get_lines(bufnr, erow, erow + 1, false)[1] or ""
    ecol = math.min(ve[2], math.max(#line - 1, 0))
    if #line > 0 then
      ecol = ecol + 1 + vim.str_utf_end(line, ecol + 1)
    end
    if vim.o.selection == "exclusive" then
      ecol = ve[2]
    end
    ecol = math.min(ecol, #line)
  else
    -- Whole lines.
    srow, scol = line1 - 1, 0
    erow = line2 - 1
    ecol = #(vim.api.nvim_buf_get_lines(bufnr, erow, erow + 1, false)[1] or "")
  end
  return { start = util.to_lsp(bufnr, srow, scol, encoding), ["end"] = util.to_lsp(bufnr, erow, ecol, encoding) }
end

--- dg.infill at the cursor or on a range.
---@param mode "fim"|"holes"|"body"|"rewrite"
---@param cmd table|nil user command opts (for a range)
---@param instruction string|nil
---@param cb fun(err: any, result: any)|nil
function M.infill(mode, cmd, instruction, cb)
  local bufnr = vim.api.nvim_get_current_buf()
  local client = util.client(bufnr)
  local range = M.range_of(bufnr, cmd, util.encoding(client))
  local arg = { uri = vim.uri_from_bufnr(bufnr), range = range, mode = mode }
  if instruction and instruction ~= "" then
    arg.instruction = instruction
  end
  return M.execute("dg.infill", arg, bufnr, mode, cb)
end

--- dg.rewriteParagraph at the cursor.
---@param instruction string|nil
---@param cb fun(err: any, result: any)|nil
function M.rewrite_paragraph(instruction, cb)
  local bufnr = vim.api.nvim_get_current_buf()
  local client = util.client(bufnr)
  local pos = vim.api.nvim_win_get_cursor(0)
  local arg = {
    uri = vim.uri_from_bufnr(bufnr),
    position = util.to_lsp(bufnr, pos[1] - 1, pos[2], util.encoding(client)),
  }
  if instruction and instruction ~= "" then
    arg.instruction = instruction
  end
  return M.execute("dg.rewriteParagraph", arg, bufnr, "paragraph", cb)
end

--- "Learn this repository" (dg.learnRepository) and its stop: the server trains in the background
--- and reports through LSP progress (see |vim.lsp.status()|); the reply only says it started.
---@param command string "dg.learnRepository" | "dg.stopLearning"
---@param minutes number|nil
function M.learning(command, minutes)
  local bufnr = vim.api.nvim_get_current_buf()
  local client = util.client(bufnr)
  if not client then
    util.notify("no dg-lsp client is attached to this buffer", vim.log.levels.ERROR)
    return false
  end
  local arg = vim.empty_dict()
  if command == "dg.learnRepository" then
    arg = { minutes = minutes or 20 }
    if client.root_dir then
      arg.folder = vim.uri_from_fname(client.root_dir)
    end
  end
  return client:request("workspace/executeCommand", { command = command, arguments = { arg } }, function(err, result)
    if err then
      util.notify(command .. " failed: " .. message_of(err), vim.log.levels.ERROR)
    elseif type(result) == "table" then
      local ok = result.started or result.stopped
      util.notify(tostring(result.message), ok and vim.log.levels.INFO or vim.log.levels.WARN)
    end
    vim.api.nvim_exec_autocmds("User", { pattern = "DgLspCommandDone", modeline = false,
      data = { command = command, bufnr = bufnr, result = result, err = err } })
  end, bufnr)
end

function M.setup(setup_opts)
  opts.notify_applied = setup_opts.notify_applied ~= false
  local create = vim.api.nvim_create_user_command
  create("DgInfill", function(c)
    M.infill("fim", c.range > 0 and c or nil)
  end, { range = true, desc = "dg-lsp: fill in the middle at the cursor (or replace the range)" })
  create("DgFillHoles", function()
    M.infill("holes", nil)
  end, { desc = "dg-lsp: fill every hole marker in the buffer" })
  create("DgCompleteBody", function()
    M.infill("body", nil)
  end, { desc = "dg-lsp: complete the function or block body at the cursor" })
  create("DgRewrite", function(c)
    -- Without a range, the current line.
    M.infill("rewrite", { range = math.max(c.range, 1), line1 = c.line1, line2 = c.line2 }, c.args)
  end, { range = true, nargs = "?", desc = "dg-lsp: rewrite the range or selection [instruction]" })
  create("DgRewriteParagraph", function(c)
    M.rewrite_paragraph(c.args)
  end, { nargs = "?", desc = "dg-lsp: rewrite the paragraph, comment block or docstring at the cursor [instruction]" })
  create("DgNextEdit", function()
    require("dg_lsp.next_edit").request(true)
  end, { desc = "dg-lsp: suggest the edit the last change implies" })
  create("DgNextEditAccept", function()
    require("dg_lsp.next_edit").accept()
  end, { desc = "dg-lsp: apply the suggested edit" })
  create("DgNextEditDismiss", function()
    require("dg_lsp.next_edit").dismiss()
  end, { desc = "dg-lsp: hide the suggested edit" })
  create("DgLearn", function(c)
    M.learning("dg.learnRepository", tonumber(c.args))
  end, { nargs = "?", desc = "dg-lsp: learn this repository in the background for [minutes] (20)" })
  create("DgLearnStop", function()
    M.learning("dg.stopLearning")
  end, { desc = "dg-lsp: stop learning the repository; what was learned is kept" })
  create("DgStatus", function()
    require("dg_lsp.status").show()
  end, { desc = "dg-lsp: show the server's state, model and device" })
end

return M
