-- End-to-end driver for tests/test_nvim_e2e.py, run as
--   nvim --headless --clean -u editors/nvim/tests/e2e.lua
-- It loads the plugin from the repository, starts the real server, and writes a JSON report of
-- what it saw to $DG_E2E_REPORT; the Python test asserts on that report. Steps run in a coroutine
-- resumed from timers, so Neovim's main loop (insert mode, LSP messages) runs normally between
-- them. Inputs (all environment variables):
--   DG_E2E_REPORT  report path          DG_E2E_DIR     directory with ghost.py, typing.py, actions.py, notes.md
--   DG_E2E_PLUGIN  editors/nvim         DG_E2E_PYTHON  interpreter with dg_lsp
--   DG_E2E_MODEL   model directory      DG_E2E_WAIT_MS timeout of each wait (default 120000)

vim.g.loaded_python3_provider = 0
vim.g.loaded_node_provider = 0
vim.g.loaded_perl_provider = 0
vim.g.loaded_ruby_provider = 0
vim.opt.swapfile = false
vim.opt.shadafile = "NONE"
vim.opt.more = false
vim.opt.shortmess:append("F")

local env = vim.env
local REPORT = assert(env.DG_E2E_REPORT, "DG_E2E_REPORT is not set")
local DIR = assert(env.DG_E2E_DIR, "DG_E2E_DIR is not set")
local WAIT = tonumber(env.DG_E2E_WAIT_MS) or 120000

vim.opt.rtp:append(assert(env.DG_E2E_PLUGIN, "DG_E2E_PLUGIN is not set"))

local report = { steps = {}, events = {}, notifications = {}, done = false }

local function write_report()
  local f = assert(io.open(REPORT .. ".tmp", "w"))
  f:write(vim.json.encode(report))
  f:close()
  os.rename(REPORT .. ".tmp", REPORT)
end

local function log(what)
  table.insert(report.events, { t = vim.uv.now(), what = what })
end

-- Keep what the plugin says (vim.notify) in the report instead of on the screen.
vim.notify = function(msg, level)
  table.insert(report.notifications, { msg = tostring(msg), level = level })
end

local dg = require("dg_lsp")
dg.setup({
  python = assert(env.DG_E2E_PYTHON, "DG_E2E_PYTHON is not set"),
  settings = { model = assert(env.DG_E2E_MODEL, "DG_E2E_MODEL is not set"), maxSteps = 4, drafts = true,
    -- The random model is never sure; with no bar its next-edit answers are shown, which is
    -- what the overlay step needs (the bar itself is tested against the server).
    nextEdit = { minConfidence = 0, onlyImplied = false } },
  -- The plugin's own ghost text client on every Neovim version; the automatic requests are
  -- switched on per buffer (b:dg_lsp_ghost) only for the typing step, so nothing races trigger().
  ghost = { native = false },
})

vim.api.nvim_create_autocmd("User", {
  pattern = { "DgLspInline", "DgLspCommandDone", "DgLspStatus", "DgLspDraft", "DgLspNextEdit" },
  callback = function(args)
    local data = vim.deepcopy(args.data or {})
    data.pattern = args.match
    if args.match == "DgLspDraft" and data.bufnr then
      -- What a user sees at that moment: the draft's virtual text.
      local ns = require("dg_lsp.draft").ns
      local marks = vim.api.nvim_buf_get_extmarks(data.bufnr, ns, 0, -1, { details = true })
      data.marks = #marks
      data.hl = marks[1] and marks[1][4].virt_text and marks[1][4].virt_text[1][2] or nil
    end
    log(data)
  end,
})

-- Coroutine helpers --------------------------------------------------------------------------

local function sleep(ms)
  local co = coroutine.running()
  vim.defer_fn(function()
    local ok, err = coroutine.resume(co)
    if not ok then
      error(err)
    end
  end, ms)
  coroutine.yield()
end

local function wait_for(what, cond, timeout)
  local deadline = vim.uv.hrtime() + (timeout or WAIT) * 1e6
  while true do
    local value = cond()
    if value then
      return value
    end
    if vim.uv.hrtime() > deadline then
      error(string.format("timed out after %d ms waiting for %s", timeout or WAIT, what), 0)
    end
    sleep(50)
  end
end

local function request(client, method, params, bufnr)
  local reply
  client:request(method, params, function(err, result)
    reply = { err = err, result = result }
  end, bufnr)
  wait_for(method .. " reply", function()
    return reply
  end)
  if reply.err then
    error(string.format("%s failed: %s", method, vim.inspect(reply.err)), 0)
  end
  return reply.result
end

local function lines(bufnr)
  return vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
end

local function mode()
  return vim.api.nvim_get_mode().mode
end

local function open(name, auto)
  vim.cmd.edit(vim.fn.fnameescape(DIR .. "/" .. name))
  local bufnr = vim.api.nvim_get_current_buf()
  vim.b[bufnr].dg_lsp_ghost = auto == true
  vim.b[bufnr].dg_lsp_next_edit = false -- on only in the next-edit step
  local client = wait_for("the dg_lsp client to attach to " .. name, function()
    for _, n in ipairs(report.notifications) do
      if n.msg:find("the server exited", 1, true) then
        error(n.msg, 0) -- no point waiting: it is gone
      end
    end
    local c = dg.client(bufnr)
    return c and c.initialized and c
  end)
  return bufnr, client
end

-- Insert mode at the end of line `row` (1-based), as `A` would start it.
local function append_at(row)
  vim.api.nvim_win_set_cursor(0, { row, 0 })
  vim.cmd("startinsert!")
  wait_for("insert mode", function()
    return mode() == "i"
  end)
end

-- Steps ------------------------------------------------------------------------------------------

local steps = {}

function steps.ready()
  local bufnr, client = open("ghost.py")
  report.client = {
    encoding = client.offset_encoding,
    root_dir = client.root_dir,
    filetype = vim.bo[bufnr].filetype,
    server_pids = vim.api.nvim_get_proc_children(vim.fn.getpid()),
  }
  local status = wait_for('dg.status state "ready"', function()
    local s = request(client, "workspace/executeCommand", { command = "dg.status", arguments = {} }, bufnr)
    if s.state == "error" then
      error("the server could not load the model: " .. tostring(s.message), 0)
    end
    if s.state == "ready" then
      return s
    end
    sleep(200)
  end)
  return {
    state = status.state,
    model = status.model,
    device = status.device,
    last_notification = dg.status(),
  }
end

function steps.ghost()
  local bufnr = vim.api.nvim_get_current_buf()
  local inline = require("dg_lsp.inline")
  local before = lines(bufnr)
  vim.api.nvim_win_set_cursor(0, { 2, 0 })
  vim.cmd("startinsert!") -- append at the end of "    return "
  wait_for("insert mode", function()
    return mode() == "i"
  end)
  local cursor = vim.api.nvim_win_get_cursor(0)
  local first = #report.events
  inline.trigger()
  local outcome = wait_for("the inline completion answer", function()
    for i = first + 1, #report.events do
      local e = report.events[i].what
      if e.pattern == "DgLspInline" and e.status ~= "cancelled" then
        return e
      end
    end
  end)
  if outcome.status ~= "shown" then
    error("inline completion was not shown: " .. vim.inspect(outcome), 0)
  end
  local shown = inline.current()
  local marks = vim.api.nvim_buf_get_extmarks(bufnr, inline.ns, 0, -1, { details = true })
  local drafts = {}
  for i = first + 1, #report.events do
    local e = report.events[i].what
    if e.pattern == "DgLspDraft" then
      table.insert(drafts, e)
    end
  end
  local result = {
    before = before,
    cursor = cursor,
    mode = mode(),
    drafts = drafts,
    draft_marks_with_ghost = #vim.api.nvim_buf_get_extmarks(bufnr, require("dg_lsp.draft").ns, 0, -1, {}),
    item = outcome.item,
    text = shown.text,
    display = shown.display,
    marks = marks,
  }
  -- Accept through the mapped key, as a user would type it.
  local key = dg.options.ghost.keys.accept
  vim.api.nvim_input(key)
  wait_for("the ghost text to be accepted with " .. key, function()
    for i = first + 1, #report.events do
      local e = report.events[i].what
      if e.pattern == "DgLspInline" and e.status == "accepted" then
        return true
      end
    end
  end, 20000)
  result.accepted_with = key
  result.after = lines(bufnr)
  result.cursor_after = vim.api.nvim_win_get_cursor(0)
  result.marks_after = #vim.api.nvim_buf_get_extmarks(bufnr, inline.ns, 0, -1, {})
  result.mode_after = mode()
  vim.cmd.stopinsert()
  wait_for("normal mode", function()
    return mode() == "n"
  end)
  return result
end

local function next_event(first, pred, what, timeout)
  return wait_for(what, function()
    for i = first + 1, #report.events do
      local e = report.events[i].what
      if pred(e) then
        return e
      end
    end
  end, timeout)
end

-- The first ghost-text answer after event `first`; an error unless it was shown.
local function answer_shown(first, what)
  local outcome = next_event(first, function(e)
    return e.pattern == "DgLspInline" and e.status ~= "cancelled"
  end, what)
  if outcome.status ~= "shown" then
    error(what .. " was not shown: " .. vim.inspect(outcome), 0)
  end
  return outcome
end

-- Several candidates: the next and previous keys show the answer's other items in turn.
function steps.cycle()
  local bufnr, client = open("cycle.py")
  local inline = require("dg_lsp.inline")
  local function configure(candidates)
    client:notify("workspace/didChangeConfiguration", { settings = { dgLsp = { candidates = candidates } } })
  end
  configure(4)
  append_at(2)
  local first = #report.events
  inline.trigger()
  local outcome = answer_shown(first, "the inline completion answer")
  local items = inline.items()
  local result = { before = lines(bufnr), count = outcome.count, items = items, shown = { inline.current().text } }
  local keys = dg.options.ghost.keys
  for _, key in ipairs({ keys.next, keys.next, keys.prev }) do
    local mark = #report.events
    vim.api.nvim_input(key)
    local cycled = next_event(mark, function(e)
      return e.pattern == "DgLspInline" and e.status == "cycled"
    end, "the ghost text to cycle with " .. key, 20000)
    table.insert(result.shown, inline.current().text)
    result.indexes = result.indexes or {}
    table.insert(result.indexes, cycled.index)
  end
  local mark = #report.events
  vim.api.nvim_input(keys.accept)
  next_event(mark, function(e)
    return e.pattern == "DgLspInline" and e.status == "accepted"
  end, "the cycled ghost text to be accepted", 20000)
  result.after = lines(bufnr)
  vim.cmd.stopinsert()
  wait_for("normal mode", function()
    return mode() == "n"
  end)
  configure(1)
  return result
end


function steps.typing()
  local bufnr = open("typing.py", true)
  local inline = require("dg_lsp.inline")
  append_at(2)
  local first = #report.events
  -- Type; after the pause the plugin asks by itself (triggerKind 2).
  vim.api.nvim_input(" + 1")
  local outcome = answer_shown(first, "the automatic inline completion")
  local shown = inline.current()
  local result = {
    typed = lines(bufnr),
    cursor = vim.api.nvim_win_get_cursor(0),
    kind = outcome.kind,
    item = outcome.item,
    display = shown.display,
  }
  first = #report.events
  local key = dg.options.ghost.keys.accept_line
  vim.api.nvim_input(key)
  local accepted = next_event(first, function(e)
    return e.pattern == "DgLspInline" and (e.status == "accepted-line" or e.status == "accepted")
  end, "the ghost text to be accepted with " .. key, 20000)
  result.accepted = accepted.status
  result.accepted_text = accepted.text
  result.after = lines(bufnr)
  result.cursor_after = vim.api.nvim_win_get_cursor(0)
  local rest = inline.current()
  result.rest = rest and rest.display or vim.NIL
  result.marks_after = #vim.api.nvim_buf_get_extmarks(bufnr, inline.ns, 0, -1, {})
  -- Let TextChangedI / CursorMovedI of the insertion run. After a partial accept the rest must
  -- still be shown; after a whole one the plugin may already show the next suggestion.
  sleep(300)
  rest = inline.current()
  result.rest_later = rest and rest.display or vim.NIL
  vim.cmd.stopinsert()
  wait_for("normal mode", function()
    return mode() == "n"
  end)
  result.marks_after_leave = #vim.api.nvim_buf_get_extmarks(bufnr, inline.ns, 0, -1, {})
  return result
end

-- Accepting a multi-line suggestion line by line, with a suggestion of known shape (the tiny
-- model's answers are noise of whatever shape).
function steps.accept_lines()
  local bufnr = vim.api.nvim_get_current_buf()
  local client = dg.client(bufnr)
  local inline = require("dg_lsp.inline")
  vim.b[bufnr].dg_lsp_ghost = false
  vim.api.nvim_win_set_cursor(0, { 1, 0 })
  vim.cmd("startinsert!")
  wait_for("insert mode", function()
    return mode() == "i"
  end)
  local before = lines(bufnr)
  local cur = vim.api.nvim_win_get_cursor(0)
  local pos = require("dg_lsp.util").to_lsp(bufnr, cur[1] - 1, cur[2], client.offset_encoding)
  local text = "  # first\n    second = 2\n    third = 3"
  assert(inline.show(bufnr, { insertText = text, range = { start = pos, ["end"] = pos } }, client))
  local marks = vim.api.nvim_buf_get_extmarks(bufnr, inline.ns, 0, -1, { details = true })
  local out = { before = before, cursor = cur, text = text, marks = marks, presses = {} }
  for _, key in ipairs({ dg.options.ghost.keys.accept_line, dg.options.ghost.keys.accept_line, dg.options.ghost.keys.accept }) do
    local first = #report.events
    vim.api.nvim_input(key)
    next_event(first, function(e)
      return e.pattern == "DgLspInline" and (e.status == "accepted" or e.status == "accepted-line")
    end, "accepting with " .. key, 20000)
    sleep(100)
    local rest = inline.current()
    table.insert(out.presses, {
      key = key,
      lines = lines(bufnr),
      cursor = vim.api.nvim_win_get_cursor(0),
      rest = rest and rest.display or vim.NIL,
    })
  end
  vim.cmd.stopinsert()
  wait_for("normal mode", function()
    return mode() == "n"
  end)
  return out
end

function steps.code_action()
  local bufnr, client = open("actions.py")
  local before = lines(bufnr)
  -- The cursor on the `r` of the last `return`: the fill goes right before it.
  local row = 0
  for i, l in ipairs(before) do
    if l:match("^    return f") then
      row = i
    end
  end
  assert(row > 0, "actions.py has no '    return f' line")
  vim.api.nvim_win_set_cursor(0, { row, 4 })
  local params = vim.lsp.util.make_range_params(0, client.offset_encoding)
  params.context = { diagnostics = {}, triggerKind = 1 }
  local actions = request(client, "textDocument/codeAction", params, bufnr) or {}
  local titles = {}
  local chosen
  for _, a in ipairs(actions) do
    table.insert(titles, a.title)
    if a.title == "DG: Fill in the middle here" then
      chosen = a
    end
  end
  if not chosen then
    error("no 'DG: Fill in the middle here' action; got " .. vim.inspect(titles), 0)
  end
  local resolved = request(client, "codeAction/resolve", chosen, bufnr)
  if not (resolved and resolved.edit) then
    error("codeAction/resolve returned no edit: " .. vim.inspect(resolved) .. "\n" .. vim.inspect(report.notifications), 0)
  end
  vim.lsp.util.apply_workspace_edit(resolved.edit, client.offset_encoding)
  return {
    before = before,
    position = params.range.start,
    titles = titles,
    edit = resolved.edit,
    after = lines(bufnr),
  }
end

function steps.paragraph()
  local bufnr = open("notes.md")
  local before = lines(bufnr)
  vim.api.nvim_win_set_cursor(0, { 4, 2 })
  local first = #report.events
  vim.cmd("DgRewriteParagraph")
  local done = wait_for("DgRewriteParagraph to finish", function()
    for i = first + 1, #report.events do
      local e = report.events[i].what
      if e.pattern == "DgLspCommandDone" then
        return e
      end
    end
  end)
  return {
    before = before,
    filetype = vim.bo[bufnr].filetype,
    cursor = { 4, 2 },
    result = done.result,
    err = done.err,
    after = lines(bufnr),
  }
end

function steps.next_edit()
  local bufnr = open("nextedit.py")
  local ne = require("dg_lsp.next_edit")
  vim.b[bufnr].dg_lsp_next_edit = true
  local out = { before = lines(bufnr) }
  -- The user renames a parameter in normal mode; the pause after it asks for the next edit.
  vim.api.nvim_win_set_cursor(0, { 1, out.before[1]:find("w,", 1, true) - 1 })
  local first = #report.events
  vim.api.nvim_feedkeys("ciwwidth" .. vim.keycode("<Esc>"), "nx", false)
  out.renamed = lines(bufnr)
  local shown = next_event(first, function(e)
    return e.pattern == "DgLspNextEdit" and e.status ~= "cancelled"
  end, "a next-edit suggestion after the pause")
  out.auto = shown.status
  if shown.status ~= "shown" then
    error("no next edit was shown: " .. vim.inspect(shown), 0)
  end
  local function overlay()
    local marks = vim.api.nvim_buf_get_extmarks(bufnr, ne.ns, 0, -1, { details = true })
    local struck, added, below = 0, {}, 0
    for _, m in ipairs(marks) do
      if m[4].hl_group == "DgLspNextEditDelete" then
        struck = struck + 1
      end
      if m[4].virt_text then
        table.insert(added, m[4].virt_text[1][1])
      end
      if m[4].virt_lines then
        below = below + 1
      end
    end
    return { marks = #marks, struck = struck, added = added, below = below }
  end
  out.edits = shown.edits
  out.overlay = overlay()
  out.lines_while_shown = lines(bufnr)
  local function press(key, status)
    local at = #report.events
    vim.api.nvim_input(dg.options.next_edit.keys[key])
    next_event(at, function(e)
      return e.pattern == "DgLspNextEdit" and e.status == status
    end, "the suggestion to be " .. status, 20000)
  end
  -- Dismissed with its key: the overlay goes, the buffer stays.
  press("dismiss", "dismissed")
  out.after_dismiss = { overlay = overlay(), lines = lines(bufnr) }
  -- Asked again and accepted with its key: the buffer gets exactly the edits shown.
  first = #report.events
  vim.cmd("DgNextEdit")
  local again = next_event(first, function(e)
    return e.pattern == "DgLspNextEdit" and e.status ~= "cancelled"
  end, "the suggestion asked for with :DgNextEdit")
  out.asked = again.status
  out.asked_edits = again.edits
  press("accept", "accepted")
  out.after_accept = { overlay = overlay(), lines = lines(bufnr) }
  return out
end

function steps.learn()
  -- The workspace's .git is only a root marker, not a repository: the server starts the run, the
  -- run refuses the folder, and the user is told why; stopping then has nothing to stop.
  local first = #report.events
  vim.cmd("DgLearn 0.1")
  local started = next_event(first, function(e)
    return e.pattern == "DgLspCommandDone" and e.command == "dg.learnRepository"
  end, ":DgLearn's reply")
  -- Neovim shows window/showMessage with nvim_echo, into :messages.
  local failure = wait_for("the failure message", function()
    for _, line in ipairs(vim.split(vim.fn.execute("messages"), "\n")) do
      if line:find("learning", 1, true) and line:find("failed", 1, true) then
        return line
      end
    end
  end)
  first = #report.events
  vim.cmd("DgLearnStop")
  local stopped = next_event(first, function(e)
    return e.pattern == "DgLspCommandDone" and e.command == "dg.stopLearning"
  end, ":DgLearnStop's reply")
  return { started = started.result, failure = failure, stopped = stopped.result }
end

function steps.extras()
  local out = {}
  local bufnr = vim.api.nvim_get_current_buf()
  local client = dg.client(bufnr)
  -- Drafts: feed the handler the notifications the server sends while denoising.
  local draft = require("dg_lsp.draft")
  local uri = vim.uri_from_bufnr(bufnr)
  draft.on_draft(nil, { uri = uri, position = { line = 0, character = 0 }, text = "draft one\ndraft two", final = false },
    { client_id = client.id })
  local marks = vim.api.nvim_buf_get_extmarks(bufnr, draft.ns, 0, -1, { details = true })
  out.draft_marks = #marks
  out.draft_hl = marks[1] and marks[1][4].virt_text and marks[1][4].virt_text[1][2] or nil
  out.draft_lines_unchanged = vim.deep_equal(lines(bufnr), report.steps.paragraph.after)
  draft.on_draft(nil, { uri = uri, position = { line = 0, character = 0 }, text = "draft one", final = true },
    { client_id = client.id })
  out.draft_marks_after_final = #vim.api.nvim_buf_get_extmarks(bufnr, draft.ns, 0, -1, {})
  -- Statusline and :DgStatus.
  out.statusline = dg.statusline()
  local n = #report.notifications
  vim.cmd("DgStatus")
  out.status_text = wait_for(":DgStatus output", function()
    for i = n + 1, #report.notifications do
      if report.notifications[i].msg:find("dg%-lsp status") then
        return report.notifications[i].msg
      end
    end
  end, 30000)
  -- Low-confidence spans of accepted text arrive as ordinary diagnostics.
  out.diagnostics = {}
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    for _, d in ipairs(vim.diagnostic.get(b)) do
      table.insert(out.diagnostics, {
        file = vim.fs.basename(vim.api.nvim_buf_get_name(b)),
        code = d.code,
        severity = d.severity,
        source = d.source,
        message = d.message,
      })
    end
  end
  -- :checkhealth dg_lsp
  vim.cmd("checkhealth dg_lsp")
  out.health = lines(vim.api.nvim_get_current_buf())
  return out
end

-- Runner -----------------------------------------------------------------------------------------

local function stop_servers()
  local clients = vim.lsp.get_clients({ name = "dg_lsp" })
  for _, c in ipairs(clients) do
    c:stop()
  end
  local ok = pcall(wait_for, "the server to exit", function()
    return #vim.lsp.get_clients({ name = "dg_lsp" }) == 0
  end, 15000)
  if not ok then
    for _, c in ipairs(vim.lsp.get_clients({ name = "dg_lsp" })) do
      c:stop(true)
    end
    sleep(500)
  end
  report.server_stopped = ok
end

local function main()
  local names = { "ready", "ghost", "cycle", "typing", "accept_lines", "code_action", "paragraph", "extras", "next_edit", "learn" }
  if (vim.env.DG_E2E_STEPS or "") ~= "" then -- e.g. "ready,next_edit": some steps, with any model
    names = vim.split(vim.env.DG_E2E_STEPS, ",", { trimempty = true })
  end
  for _, name in ipairs(names) do
    log({ step = name })
    report.current = name
    write_report()
    report.steps[name] = steps[name]()
  end
  report.current = nil
end

vim.defer_fn(function()
  local co
  co = coroutine.create(function()
    local ok, err = xpcall(main, debug.traceback)
    if not ok then
      report.error = tostring(err)
    end
    write_report()
    pcall(stop_servers)
    report.done = true
    write_report()
    vim.cmd("qall!")
  end)
  local ok, err = coroutine.resume(co)
  if not ok then
    report.error = "runner: " .. tostring(err)
    report.done = true
    write_report()
    vim.cmd("qall!")
  end
end, 10)
