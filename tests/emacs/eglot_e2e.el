;;; eglot_e2e.el --- Emacs eglot, a client that is not ours, against the real dg-lsp server -*- lexical-binding: t -*-

;; Run by tests/test_eglot_e2e.py as
;;   emacs --batch -Q -l tests/emacs/eglot_e2e.el
;; with DG_E2E_PYTHON (the interpreter that runs `-m dg_lsp serve`), DG_E2E_MODEL (a model
;; directory), DG_E2E_DIR (a scratch folder for the files) and DG_E2E_REPORT (where the JSON
;; report goes).  It goes through what a user of eglot sees: the server starts from
;; `eglot-server-programs', a completion item comes through eglot's own completion-at-point
;; function, a code action is applied to the buffer through eglot's code-action path, a command
;; runs through `eglot-execute-command', and the server shuts down.  The tiny random model writes
;; noise, so the report records what happened and the Python test checks it against the server's
;; own answers, never against the text.

;; Emacs 29 and later ship eglot; on 28 it is Debian's elpa-eglot, which -Q does not activate.
(unless (locate-library "eglot")
  (require 'package)
  (setq package-directory-list '("/usr/share/emacs/site-lisp/elpa"))
  (package-initialize))
(require 'eglot)
(require 'json)
(require 'subr-x)

(setq eglot-sync-connect t
      ;; The edits the user asked for by choosing the action; batch mode cannot answer y-or-n-p.
      eglot-confirm-server-initiated-edits nil
      eglot-connect-timeout 120
      eglot-autoshutdown nil
      eglot-events-buffer-size 0
      make-backup-files nil
      create-lockfiles nil
      auto-save-default nil)

(defvar e2e-report (list))
(defun e2e-note (key value) (push (cons key value) e2e-report))

(defun e2e-env (name)
  (or (getenv name) (error "%s is not set" name)))

(defun e2e-wait (predicate seconds what)
  "Run the event loop until PREDICATE is non-nil or SECONDS pass."
  (let ((deadline (+ (float-time) seconds)) result)
    (while (and (not (setq result (funcall predicate))) (< (float-time) deadline))
      (accept-process-output nil 0.1))
    (or result (error "timed out waiting for %s" what))))

(defun e2e-command (server command &rest arguments)
  (jsonrpc-request server :workspace/executeCommand
                   (list :command command :arguments (vconcat arguments))))

(defun e2e-write-report ()
  (with-temp-file (e2e-env "DG_E2E_REPORT")
    (insert (json-encode e2e-report))))

(let* ((python (e2e-env "DG_E2E_PYTHON"))
       (dir (file-name-as-directory (e2e-env "DG_E2E_DIR")))
       (model (e2e-env "DG_E2E_MODEL"))
       (file (concat dir "ghost.py")))
  (setq eglot-server-programs
        `((python-mode . (,python "-m" "dg_lsp" "serve"
                                  :initializationOptions (:model ,model :maxSteps 4)))))
  (condition-case err
      (progn
        (with-temp-file file
          (insert "def area(width, height):\n    return \n\n\ndef main():\n    print(area(2, 3))\n"))
        (find-file file)
        (python-mode)
        (eglot-ensure)
        ;; eglot-ensure connects after the user's next command; in batch there is none, so run
        ;; the hook that command would have run.
        (run-hooks 'post-command-hook)
        (let ((server (e2e-wait #'eglot-current-server 120 "the server to connect")))
          (e2e-note "connected" t)
          (e2e-note "server_name" (plist-get (eglot--server-info server) :name))
          ;; The model loads in the background; every request is answered meanwhile.
          (e2e-wait (lambda () (equal (plist-get (e2e-command server "dg.status") :state) "ready"))
                    120 "the model to load")
          (e2e-note "status_model" (plist-get (e2e-command server "dg.status") :model))
          ;; A completion item through eglot's completion-at-point function.
          (goto-char (point-min))
          (forward-line 1)
          (end-of-line)
          (let* ((capf (eglot-completion-at-point))
                 (table (nth 2 capf))
                 (items (all-completions "" table)))
            (e2e-note "completion_count" (length items))
            (e2e-note "completion_first" (or (car items) :null)))
          ;; A code action applied to the buffer: eglot lists the actions at point and runs the
          ;; chosen one through the same function its interactive command uses.
          (let* ((before (buffer-substring-no-properties (point-min) (point-max)))
                 (actions (eglot-code-actions (point) (point)))
                 (fill (cl-find-if (lambda (a) (string-prefix-p "DG: Fill" (plist-get a :title))) actions)))
            (e2e-note "action_titles" (vconcat (mapcar (lambda (a) (plist-get a :title)) actions)))
            (when fill
              ;; A keyboard event (not a mouse one) makes eglot ask with completing-read.
              (let ((last-nonmenu-event ?\r))
                (cl-letf (((symbol-function 'completing-read)
                           (lambda (&rest _) (plist-get fill :title))))
                  (eglot--read-execute-code-action (list fill) server)))
              (e2e-wait (lambda () (not (equal before (buffer-substring-no-properties (point-min) (point-max)))))
                        120 "the code action's edit"))
            (e2e-note "buffer_before_action" before)
            (e2e-note "buffer_after_action" (buffer-substring-no-properties (point-min) (point-max))))
          ;; eglot sends the edit's didChange when Emacs is next idle; send it now.
          (eglot--signal-textDocument/didChange)
          ;; A command with the standard parameters (TextDocumentIdentifier).
          (let ((hash (e2e-command server "dg.documentHash"
                                   (list :textDocument (eglot--TextDocumentIdentifier)))))
            (e2e-note "hash_version" (plist-get hash :version))
            (e2e-note "hash_sha256" (plist-get hash :sha256)))
          (e2e-note "buffer_final" (buffer-substring-no-properties (point-min) (point-max)))
          (eglot-shutdown server)
          (e2e-note "shutdown" (not (jsonrpc-running-p server)))))
    (error (e2e-note "error" (error-message-string err))))
  (e2e-write-report)
  (kill-emacs 0))

;;; eglot_e2e.el ends here
