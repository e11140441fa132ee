//! A lit-style runner for the `RUN:` lines of golden tests.
//!
//! ```text
//! // RUN: tessera run-pass --target=tpu %s | FileCheck %s
//! // RUN: not tessera fmt %s 2>&1 | FileCheck %s --check-prefix=ERR
//! ```
//!
//! Each RUN line is tokenized here (no `sh -c`, so it behaves the same on
//! every machine), split into pipelines joined by `&&`, `||` or `;`, and run
//! stage by stage: a stage's standard output is the next stage's standard
//! input. Like lit, a pipeline fails when any of its stages fails
//! (`pipefail`). `FileCheck`/`filecheck` run in-process through this crate,
//! `tessera` is [`RunConfig::tessera_bin`], other commands come from
//! [`RunConfig::extra_tools`] or `PATH`.
//!
//! Supported syntax: words with `'single'` and `"double"` quotes and `\`
//! escapes; `|`, `&&`, `||`, `;`; redirections `< f`, `> f`, `>> f`,
//! `2> f`, `2>> f`, `2>&1`, `1>&2` / `>&2`, `&> f`; the `not` prefix; and
//! the substitutions `%s` (test path), `%S` (its directory), `%t` (a temp
//! file path unique to the test), `%T` (its directory) and `%%`.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Where the commands of a RUN line come from and where they run.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// The binary the command word `tessera` runs.
    pub tessera_bin: PathBuf,
    /// Further command words and the binaries they run.
    pub extra_tools: Vec<(String, PathBuf)>,
    /// When set, every FileCheck stage also runs through this binary (LLVM's
    /// FileCheck) and the two must agree on pass/fail.
    pub llvm_filecheck: Option<PathBuf>,
    /// The working directory of every command; relative paths in commands
    /// and redirections are resolved against it.
    pub cwd: PathBuf,
}

/// What one stage of a failed RUN line did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StageReport {
    /// The command as run, after substitutions.
    pub command: String,
    /// `exit status N`, `killed by a signal`, or why it could not start.
    pub status: String,
    /// What the stage wrote to its standard error (FileCheck's diagnostics
    /// for a FileCheck stage).
    pub stderr: String,
}

/// A RUN line that did not succeed, or a test file that could not be run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct RunFailure {
    /// The test file.
    pub path: PathBuf,
    /// The failing RUN line as written (continuations joined), if any.
    pub run_line: Option<String>,
    /// Why it failed, in one sentence.
    pub reason: String,
    /// Every stage that ran in the failing pipeline, in order.
    pub stages: Vec<StageReport>,
    /// The standard output of the failing pipeline's last stage.
    pub stdout: String,
}

impl fmt::Display for RunFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}: {}", self.path.display(), self.reason)?;
        if let Some(line) = &self.run_line {
            writeln!(f, "  RUN: {line}")?;
        }
        for (index, stage) in self.stages.iter().enumerate() {
            writeln!(
                f,
                "--- command {}: {} ({})",
                index + 1,
                stage.command,
                stage.status
            )?;
            if !stage.stderr.is_empty() {
                f.write_str(&stage.stderr)?;
                if !stage.stderr.ends_with('\n') {
                    writeln!(f)?;
                }
            }
        }
        if !self.stdout.is_empty() {
            writeln!(f, "--- standard output of the last command:")?;
            f.write_str(&self.stdout)?;
            if !self.stdout.ends_with('\n') {
                writeln!(f)?;
            }
        }
        Ok(())
    }
}

/// Extracts the RUN commands of a test file, in order. A RUN line is a
/// comment (`//`, `#` or `;`, possibly repeated) whose text starts with
/// `RUN:`; a command ending in `\` continues on the next RUN line.
pub fn run_lines(file_text: &str) -> Vec<String> {
    let mut commands = Vec::new();
    let mut pending: Option<String> = None;
    for line in file_text.lines() {
        let Some(command) = run_line_text(line) else {
            continue;
        };
        let mut text = pending.take().unwrap_or_default();
        let (body, continues) = match command.strip_suffix('\\') {
            Some(body) => (body.trim(), true),
            None => (command, false),
        };
        if !text.is_empty() && !body.is_empty() {
            text.push(' ');
        }
        text.push_str(body);
        if continues {
            pending = Some(text);
        } else if !text.is_empty() {
            commands.push(text);
        }
    }
    if let Some(text) = pending.filter(|t| !t.is_empty()) {
        commands.push(text);
    }
    commands
}

/// The command on a single RUN line, trimmed, or `None` for other lines.
fn run_line_text(line: &str) -> Option<&str> {
    let trimmed = line.trim_start();
    let marker_len = if trimmed.starts_with("//") {
        trimmed.len() - trimmed.trim_start_matches('/').len()
    } else if trimmed.starts_with('#') {
        trimmed.len() - trimmed.trim_start_matches('#').len()
    } else if trimmed.starts_with(';') {
        trimmed.len() - trimmed.trim_start_matches(';').len()
    } else {
        return None;
    };
    let rest = trimmed[marker_len..].trim_start();
    rest.strip_prefix("RUN:").map(str::trim)
}

/// A lexical token of a RUN line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Token {
    Word(String),
    /// `|`
    Pipe,
    /// `&&`
    And,
    /// `||`
    Or,
    /// `;`
    Semicolon,
    Redirect(Redirect),
}

/// A redirection, with its target word already attached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Redirect {
    /// `N< path` (N defaults to 0; only 0 is supported).
    Input(String),
    /// `N> path` or, with `append`, `N>> path`.
    Output { fd: u8, path: String, append: bool },
    /// `N>&M`: make `fd` write wherever `target` writes.
    Duplicate { fd: u8, target: u8 },
    /// `&> path`: standard output and standard error to one file.
    Both(String),
}

/// Splits a RUN command into tokens the way a POSIX shell would for the
/// subset of syntax described in the module documentation.
pub fn tokenize(command: &str) -> Result<Vec<Token>, String> {
    let mut t = Tokenizer {
        chars: command.chars().collect(),
        i: 0,
        tokens: Vec::new(),
        word: String::new(),
        in_word: false,
        word_is_fd: false,
        pending: None,
    };
    while let Some(&c) = t.chars.get(t.i) {
        match c {
            ' ' | '\t' | '\n' | '\r' => {
                t.finish_word();
                t.i += 1;
            }
            '\'' => t.single_quoted()?,
            '"' => t.double_quoted()?,
            '\\' => {
                let Some(&escaped) = t.chars.get(t.i + 1) else {
                    return Err("trailing backslash".to_string());
                };
                t.quoted_char(escaped);
                t.i += 2;
            }
            '|' | ';' | '&' | '<' | '>' => t.operator(c)?,
            other => {
                t.word_is_fd = !t.in_word && other.is_ascii_digit();
                t.in_word = true;
                t.word.push(other);
                t.i += 1;
            }
        }
    }
    t.finish_word();
    if t.pending.is_some() {
        return Err("redirection without a target at the end of the line".to_string());
    }
    Ok(t.tokens)
}

/// The state of [`tokenize`]: where it is, the tokens so far and the word
/// being read.
struct Tokenizer {
    chars: Vec<char>,
    i: usize,
    tokens: Vec<Token>,
    word: String,
    /// Whether a word has started (it may be empty: `''`).
    in_word: bool,
    /// Whether the current word so far is a lone unquoted digit, which
    /// makes it a file descriptor when a redirection operator follows.
    word_is_fd: bool,
    /// A redirection waiting for its target word: (operator, fd, append).
    pending: Option<(char, u8, bool)>,
}

impl Tokenizer {
    /// Ends the current word: a redirection's target when one waits for
    /// it, else a word of its own.
    fn finish_word(&mut self) {
        if !self.in_word {
            return;
        }
        let text = std::mem::take(&mut self.word);
        self.in_word = false;
        self.tokens.push(match self.pending.take() {
            Some(('<', _, _)) => Token::Redirect(Redirect::Input(text)),
            Some(('&', _, _)) => Token::Redirect(Redirect::Both(text)),
            Some((_, fd, append)) => Token::Redirect(Redirect::Output {
                fd,
                path: text,
                append,
            }),
            None => Token::Word(text),
        });
    }

    /// A character that can never name a file descriptor.
    fn quoted_char(&mut self, c: char) {
        self.in_word = true;
        self.word_is_fd = false;
        self.word.push(c);
    }

    /// `'...'`: everything up to the next `'`, as it is.
    fn single_quoted(&mut self) -> Result<(), String> {
        self.in_word = true;
        self.word_is_fd = false;
        let from = self.i + 1;
        let Some(end) = self.chars[from..].iter().position(|&q| q == '\'') else {
            return Err("unterminated single quote".to_string());
        };
        self.word.extend(&self.chars[from..from + end]);
        self.i += end + 2;
        Ok(())
    }

    /// `"..."`: up to the next unescaped `"`; a backslash escapes only
    /// `"`, `\`, `$` and `` ` ``.
    fn double_quoted(&mut self) -> Result<(), String> {
        self.in_word = true;
        self.word_is_fd = false;
        self.i += 1;
        loop {
            match self.chars.get(self.i) {
                None => return Err("unterminated double quote".to_string()),
                Some('"') => {
                    self.i += 1;
                    return Ok(());
                }
                Some('\\')
                    if matches!(self.chars.get(self.i + 1), Some('"' | '\\' | '$' | '`')) =>
                {
                    self.word.push(self.chars[self.i + 1]);
                    self.i += 2;
                }
                Some(&other) => {
                    self.word.push(other);
                    self.i += 1;
                }
            }
        }
    }

    /// `|`, `||`, `;`, `&&`, `&>`, `<` and the output redirections, at
    /// operator character `c`.
    fn operator(&mut self, c: char) -> Result<(), String> {
        // A lone digit right before `<` or `>` names a descriptor.
        let mut fd = None;
        if (c == '<' || c == '>') && self.in_word && self.word_is_fd {
            fd = self.word.parse::<u8>().ok();
            self.word.clear();
            self.in_word = false;
        }
        self.finish_word();
        if self.pending.is_some() {
            return Err(format!("redirection without a target before `{c}`"));
        }
        let next = self.chars.get(self.i + 1).copied();
        let (token, width) = match (c, next) {
            ('|', Some('|')) => (Some(Token::Or), 2),
            ('|', _) => (Some(Token::Pipe), 1),
            (';', _) => (Some(Token::Semicolon), 1),
            ('&', Some('&')) => (Some(Token::And), 2),
            ('&', Some('>')) => {
                self.pending = Some(('&', 1, false));
                (None, 2)
            }
            ('&', _) => return Err("background jobs (`&`) are not supported".to_string()),
            ('<', _) => {
                if fd.is_some_and(|fd| fd != 0) {
                    return Err("only standard input can be redirected with `<`".to_string());
                }
                self.pending = Some(('<', 0, false));
                (None, 1)
            }
            _ => {
                self.output_redirection(fd.unwrap_or(1))?;
                (None, 0)
            }
        };
        self.tokens.extend(token);
        self.i += width;
        self.word_is_fd = false;
        Ok(())
    }

    /// At `>` for descriptor `fd`: `>`, `>>` or `>&M`.
    fn output_redirection(&mut self, fd: u8) -> Result<(), String> {
        if fd != 1 && fd != 2 {
            return Err(format!("file descriptor {fd} is not supported"));
        }
        self.i += 1;
        if self.chars.get(self.i) == Some(&'&') {
            let target = self.chars.get(self.i + 1).and_then(|d| d.to_digit(10));
            match target {
                Some(target @ (1 | 2)) => {
                    self.tokens.push(Token::Redirect(Redirect::Duplicate {
                        fd,
                        target: target as u8,
                    }));
                    self.i += 2;
                }
                _ => return Err("expected `1` or `2` after `>&`".to_string()),
            }
        } else if self.chars.get(self.i) == Some(&'>') {
            self.pending = Some(('>', fd, true));
            self.i += 1;
        } else {
            self.pending = Some(('>', fd, false));
        }
        Ok(())
    }
}

#[derive(Clone, Debug, Default)]
struct Stage {
    words: Vec<String>,
    redirects: Vec<Redirect>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Connector {
    And,
    Or,
    Sequence,
}

/// Groups tokens into pipelines of stages, joined by connectors.
fn parse_script(tokens: Vec<Token>) -> Result<Vec<(Connector, Vec<Stage>)>, String> {
    let mut script = Vec::new();
    let mut pipeline: Vec<Stage> = Vec::new();
    let mut stage = Stage::default();
    let mut connector = Connector::Sequence;
    let close_stage = |stage: &mut Stage, pipeline: &mut Vec<Stage>| -> Result<(), String> {
        if stage.words.is_empty() {
            return Err("empty command".to_string());
        }
        pipeline.push(std::mem::take(stage));
        Ok(())
    };
    for token in tokens {
        match token {
            Token::Word(word) => stage.words.push(word),
            Token::Redirect(redirect) => stage.redirects.push(redirect),
            Token::Pipe => close_stage(&mut stage, &mut pipeline)?,
            Token::And | Token::Or | Token::Semicolon => {
                close_stage(&mut stage, &mut pipeline)?;
                script.push((connector, std::mem::take(&mut pipeline)));
                connector = match token {
                    Token::And => Connector::And,
                    Token::Or => Connector::Or,
                    _ => Connector::Sequence,
                };
            }
        }
    }
    if !stage.words.is_empty() || !stage.redirects.is_empty() || !pipeline.is_empty() {
        close_stage(&mut stage, &mut pipeline)?;
    }
    if !pipeline.is_empty() {
        script.push((connector, pipeline));
    } else if connector != Connector::Sequence {
        return Err("missing command after `&&` or `||`".to_string());
    }
    Ok(script)
}

/// Per-file substitution values.
struct Substitutions {
    source: String,
    source_dir: String,
    temp: String,
    temp_dir: String,
}

impl Substitutions {
    fn apply(&self, word: &str) -> String {
        let mut out = String::with_capacity(word.len());
        let mut chars = word.chars().peekable();
        while let Some(c) = chars.next() {
            if c != '%' {
                out.push(c);
                continue;
            }
            match chars.peek() {
                Some('s') => out.push_str(&self.source),
                Some('S') => out.push_str(&self.source_dir),
                Some('t') => out.push_str(&self.temp),
                Some('T') => out.push_str(&self.temp_dir),
                Some('%') => out.push('%'),
                _ => {
                    out.push('%');
                    continue;
                }
            }
            chars.next();
        }
        out
    }
}

/// Where a stage's descriptor 1 or 2 writes.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Sink {
    Stdout,
    Stderr,
    File(PathBuf),
}

/// How a stage ended.
enum Status {
    Exited(i32),
    Signaled,
    NotStarted(String),
}

impl Status {
    fn describe(&self) -> String {
        match self {
            Status::Exited(code) => format!("exit status {code}"),
            Status::Signaled => "killed by a signal".to_string(),
            Status::NotStarted(why) => why.clone(),
        }
    }
}

struct StageOutcome {
    succeeded: bool,
    stdout: Vec<u8>,
    report: StageReport,
}

static NEXT_TEMP_DIR: AtomicUsize = AtomicUsize::new(0);

/// Runs every RUN line of the test file at `path`; each must succeed.
pub fn run_file(path: &Path, cfg: &RunConfig) -> Result<(), RunFailure> {
    let failure = |reason: String| RunFailure {
        path: path.to_path_buf(),
        run_line: None,
        reason,
        stages: Vec::new(),
        stdout: String::new(),
    };
    let text =
        std::fs::read_to_string(path).map_err(|e| failure(format!("cannot read the test: {e}")))?;
    let commands = run_lines(&text);
    if commands.is_empty() {
        return Err(failure("the test has no RUN: lines".to_string()));
    }

    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let temp_dir = std::env::temp_dir().join(format!(
        "tessera-lit-{}-{}",
        std::process::id(),
        NEXT_TEMP_DIR.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&temp_dir)
        .map_err(|e| failure(format!("cannot create {}: {e}", temp_dir.display())))?;
    let stem = absolute
        .file_name()
        .map_or_else(|| "test".into(), |n| n.to_string_lossy().into_owned());
    let substitutions = Substitutions {
        source: absolute.to_string_lossy().into_owned(),
        source_dir: absolute
            .parent()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default(),
        temp: temp_dir
            .join(format!("{stem}.tmp"))
            .to_string_lossy()
            .into_owned(),
        temp_dir: temp_dir.to_string_lossy().into_owned(),
    };

    let mut result = Ok(());
    for command in &commands {
        if let Err(mut e) = run_command(command, &substitutions, cfg) {
            e.path = path.to_path_buf();
            e.run_line = Some(command.clone());
            result = Err(e);
            break;
        }
    }
    // Temporaries are removed only on success so failures can be inspected.
    if result.is_ok() {
        let _ = std::fs::remove_dir_all(&temp_dir);
    }
    result
}

fn run_command(
    command: &str,
    substitutions: &Substitutions,
    cfg: &RunConfig,
) -> Result<(), RunFailure> {
    let failure = |reason: String, stages: Vec<StageReport>, stdout: String| RunFailure {
        path: PathBuf::new(),
        run_line: None,
        reason,
        stages,
        stdout,
    };
    let tokens = tokenize(command).map_err(|e| {
        failure(
            format!("cannot parse the RUN line: {e}"),
            vec![],
            String::new(),
        )
    })?;
    let tokens = tokens
        .into_iter()
        .map(|token| match token {
            Token::Word(word) => Token::Word(substitutions.apply(&word)),
            Token::Redirect(Redirect::Input(p)) => {
                Token::Redirect(Redirect::Input(substitutions.apply(&p)))
            }
            Token::Redirect(Redirect::Both(p)) => {
                Token::Redirect(Redirect::Both(substitutions.apply(&p)))
            }
            Token::Redirect(Redirect::Output { fd, path, append }) => {
                Token::Redirect(Redirect::Output {
                    fd,
                    path: substitutions.apply(&path),
                    append,
                })
            }
            other => other,
        })
        .collect();
    let script = parse_script(tokens).map_err(|e| {
        failure(
            format!("cannot parse the RUN line: {e}"),
            vec![],
            String::new(),
        )
    })?;

    let mut last: Option<(bool, Vec<StageReport>, String)> = None;
    for (connector, pipeline) in script {
        let previous_ok = last.as_ref().map(|(ok, _, _)| *ok);
        let skip = match connector {
            Connector::And => previous_ok == Some(false),
            Connector::Or => previous_ok == Some(true),
            Connector::Sequence => false,
        };
        if skip {
            continue;
        }
        last = Some(run_pipeline(&pipeline, cfg));
    }
    match last {
        Some((false, stages, stdout)) => {
            let failed = stages.iter().position(|s| !s.status.starts_with("ok"));
            let reason = match failed {
                Some(index) => format!(
                    "RUN line failed: command {} ({})",
                    index + 1,
                    stages[index].status
                ),
                None => "RUN line failed".to_string(),
            };
            let stages = stages
                .into_iter()
                .map(|mut s| {
                    if let Some(rest) = s.status.strip_prefix("ok: ") {
                        s.status = rest.to_string();
                    }
                    s
                })
                .collect();
            Err(failure(reason, stages, stdout))
        }
        _ => Ok(()),
    }
}

/// Runs one pipeline; returns whether every stage succeeded, the stage
/// reports (statuses of successful stages start with `ok: `) and the last
/// stage's standard output.
fn run_pipeline(pipeline: &[Stage], cfg: &RunConfig) -> (bool, Vec<StageReport>, String) {
    let mut input = Vec::new();
    let mut reports = Vec::new();
    let mut all_ok = true;
    for stage in pipeline {
        let outcome = run_stage(stage, std::mem::take(&mut input), cfg);
        all_ok &= outcome.succeeded;
        let mut report = outcome.report;
        if outcome.succeeded {
            report.status = format!("ok: {}", report.status);
        }
        reports.push(report);
        input = outcome.stdout;
    }
    (
        all_ok,
        reports,
        String::from_utf8_lossy(&input).into_owned(),
    )
}

fn resolve_path(cfg: &RunConfig, path: &str) -> PathBuf {
    let path = Path::new(path);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        cfg.cwd.join(path)
    }
}

/// What a command produced: its status and the bytes that reached the
/// pipeline's standard output and the stage's captured standard error (after
/// redirections to files were applied).
struct RawOutcome {
    status: Status,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

fn run_stage(stage: &Stage, stdin: Vec<u8>, cfg: &RunConfig) -> StageOutcome {
    let mut words = stage.words.as_slice();
    let mut inverted = false;
    while let Some((first, rest)) = words.split_first() {
        if first != "not" {
            break;
        }
        inverted = !inverted;
        words = rest;
    }
    let command_text = display_command(&stage.words);
    let not_started = |why: String| StageOutcome {
        succeeded: false,
        stdout: Vec::new(),
        report: StageReport {
            command: command_text.clone(),
            status: why,
            stderr: String::new(),
        },
    };
    let Some((program, args)) = words.split_first() else {
        return not_started("`not` without a command".to_string());
    };

    // Resolve descriptors 1 and 2, applying redirections left to right.
    let mut stdin = stdin;
    let mut out_sink = Sink::Stdout;
    let mut err_sink = Sink::Stderr;
    for redirect in &stage.redirects {
        match redirect {
            Redirect::Input(path) => match std::fs::read(resolve_path(cfg, path)) {
                Ok(bytes) => stdin = bytes,
                Err(e) => return not_started(format!("cannot read `{path}`: {e}")),
            },
            Redirect::Output { fd, path, append } => {
                let file = resolve_path(cfg, path);
                // Truncate now; all writes later append, so `> f 2>&1`
                // keeps both streams.
                if !append && let Err(e) = File::create(&file) {
                    return not_started(format!("cannot write `{path}`: {e}"));
                }
                if *fd == 2 {
                    err_sink = Sink::File(file)
                } else {
                    out_sink = Sink::File(file)
                }
            }
            Redirect::Both(path) => {
                let file = resolve_path(cfg, path);
                if let Err(e) = File::create(&file) {
                    return not_started(format!("cannot write `{path}`: {e}"));
                }
                out_sink = Sink::File(file.clone());
                err_sink = Sink::File(file);
            }
            Redirect::Duplicate { fd, target } => {
                let source = if *target == 2 {
                    err_sink.clone()
                } else {
                    out_sink.clone()
                };
                if *fd == 2 {
                    err_sink = source
                } else {
                    out_sink = source
                }
            }
        }
    }

    let mut note = None;
    let raw = if program == "FileCheck" || program == "filecheck" {
        let (status, diagnostics, disagreement) = run_filecheck(args, &stdin, cfg);
        note = disagreement;
        // FileCheck writes nothing to standard output; its diagnostics go
        // wherever descriptor 2 points.
        let mut stdout = Vec::new();
        let mut stderr = Vec::new();
        let delivered = match &err_sink {
            Sink::Stdout => {
                stdout = diagnostics;
                Ok(())
            }
            Sink::Stderr => {
                stderr = diagnostics;
                Ok(())
            }
            Sink::File(path) => append_to(path, &diagnostics),
        };
        if let Err(e) = delivered {
            return not_started(e);
        }
        RawOutcome {
            status,
            stdout,
            stderr,
        }
    } else {
        let binary = if program == "tessera" {
            cfg.tessera_bin.clone()
        } else if let Some((_, path)) = cfg.extra_tools.iter().find(|(name, _)| name == program) {
            path.clone()
        } else if program.contains('/') {
            resolve_path(cfg, program)
        } else {
            PathBuf::from(program)
        };
        run_external(&binary, args, &stdin, &out_sink, &err_sink, cfg)
    };

    // Like lit's `not`, a crash is a failure either way.
    let succeeded = match raw.status {
        Status::Exited(code) => (code == 0) != inverted,
        Status::Signaled | Status::NotStarted(_) => false,
    };
    let mut stderr = String::from_utf8_lossy(&raw.stderr).into_owned();
    if let Some(note) = note {
        stderr.push_str(&note);
    }
    StageOutcome {
        succeeded,
        stdout: raw.stdout,
        report: StageReport {
            command: command_text,
            status: raw.status.describe(),
            stderr,
        },
    }
}

/// Shows a command's words so that they could be pasted back into a RUN
/// line: words with blanks or shell metacharacters are single-quoted.
fn display_command(words: &[String]) -> String {
    let quoted: Vec<String> = words
        .iter()
        .map(|word| {
            let plain = !word.is_empty()
                && !word
                    .chars()
                    .any(|c| c.is_whitespace() || "'\"\\|&;<>$`".contains(c));
            if plain {
                word.clone()
            } else {
                format!("'{}'", word.replace('\'', "'\\''"))
            }
        })
        .collect();
    quoted.join(" ")
}

fn append_to(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let mut file = OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| format!("cannot write `{}`: {e}", path.display()))?;
    file.write_all(bytes)
        .map_err(|e| format!("cannot write `{}`: {e}", path.display()))
}

/// Runs our FileCheck in-process and, if configured, LLVM's as a referee.
/// Returns the status, our diagnostics, and an explanation when LLVM's
/// verdict differs (which fails the stage whatever `not` says).
fn run_filecheck(
    args: &[String],
    stdin: &[u8],
    cfg: &RunConfig,
) -> (Status, Vec<u8>, Option<String>) {
    let mut diagnostics = Vec::new();
    let code = crate::cli::run_cli_in_dir(args, &mut &stdin[..], &mut diagnostics, &cfg.cwd);
    let Some(llvm) = &cfg.llvm_filecheck else {
        return (Status::Exited(code), diagnostics, None);
    };
    let reference = run_external(llvm, args, stdin, &Sink::Stdout, &Sink::Stderr, cfg);
    let agrees =
        matches!(reference.status, Status::Exited(llvm_code) if (llvm_code == 0) == (code == 0));
    if agrees {
        return (Status::Exited(code), diagnostics, None);
    }
    let note = format!(
        "LLVM FileCheck ({}) disagrees: it ended with {} while ours ended with exit status {code}.\n--- LLVM FileCheck stderr:\n{}",
        llvm.display(),
        reference.status.describe(),
        String::from_utf8_lossy(&reference.stderr)
    );
    let status = Status::NotStarted(format!(
        "exit status {code}, but LLVM FileCheck gave {}",
        reference.status.describe()
    ));
    (status, diagnostics, Some(note))
}

/// Opens a sink's file for appending.
fn open_file(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().append(true).create(true).open(path)
}

/// Runs an external program with `stdin` as its input. Output aimed at
/// [`Sink::Stdout`] / [`Sink::Stderr`] is captured through pipes (one pipe
/// per destination, so `2>&1` keeps the interleaving); output aimed at a
/// file goes straight to the file.
fn run_external(
    binary: &Path,
    args: &[String],
    stdin: &[u8],
    out_sink: &Sink,
    err_sink: &Sink,
    cfg: &RunConfig,
) -> RawOutcome {
    let fail = |why: String| RawOutcome {
        status: Status::NotStarted(why),
        stdout: Vec::new(),
        stderr: Vec::new(),
    };
    let wants = |sink: &Sink| out_sink == sink || err_sink == sink;
    let out_pipe = if wants(&Sink::Stdout) {
        Some(std::io::pipe())
    } else {
        None
    }
    .transpose();
    let err_pipe = if wants(&Sink::Stderr) {
        Some(std::io::pipe())
    } else {
        None
    }
    .transpose();
    let (out_pipe, err_pipe) = match (out_pipe, err_pipe) {
        (Ok(out_pipe), Ok(err_pipe)) => (out_pipe, err_pipe),
        (Err(e), _) | (_, Err(e)) => return fail(format!("cannot create a pipe: {e}")),
    };

    let stdio_for = |sink: &Sink| -> std::io::Result<Stdio> {
        let pipe = match sink {
            Sink::Stdout => &out_pipe,
            Sink::Stderr => &err_pipe,
            Sink::File(path) => return open_file(path).map(Stdio::from),
        };
        match pipe {
            Some((_, writer)) => writer.try_clone().map(Stdio::from),
            None => Ok(Stdio::null()),
        }
    };
    let (stdout_stdio, stderr_stdio) = match (stdio_for(out_sink), stdio_for(err_sink)) {
        (Ok(out), Ok(err)) => (out, err),
        (Err(e), _) | (_, Err(e)) => return fail(format!("cannot open an output: {e}")),
    };

    let mut command = Command::new(binary);
    command
        .args(args)
        .current_dir(&cfg.cwd)
        .stdin(Stdio::piped())
        .stdout(stdout_stdio)
        .stderr(stderr_stdio);
    let spawned = command.spawn();
    // Close every copy of the pipes' write ends we hold, so that reading
    // reaches end-of-file once the child exits.
    drop(command);
    let out_reader = out_pipe.map(|(reader, _writer)| reader);
    let err_reader = err_pipe.map(|(reader, _writer)| reader);
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => return fail(format!("cannot run `{}`: {e}", binary.display())),
    };

    let child_stdin = child.stdin.take();
    let (stdout, stderr) = std::thread::scope(|scope| {
        // Feed stdin on its own thread so a child that writes a lot before
        // reading cannot deadlock against us.
        let feeder = scope.spawn(move || {
            if let Some(mut pipe) = child_stdin {
                // A child that exits without reading closes the pipe early.
                let _ = pipe.write_all(stdin);
            }
        });
        let out_thread = out_reader.map(|mut reader| {
            scope.spawn(move || {
                let mut bytes = Vec::new();
                let _ = reader.read_to_end(&mut bytes);
                bytes
            })
        });
        let mut stderr = Vec::new();
        if let Some(mut reader) = err_reader {
            let _ = reader.read_to_end(&mut stderr);
        }
        let stdout = out_thread
            .map(|t| t.join().unwrap_or_default())
            .unwrap_or_default();
        let _ = feeder.join();
        (stdout, stderr)
    });

    let status = match child.wait() {
        Ok(status) => match status.code() {
            Some(code) => Status::Exited(code),
            None => Status::Signaled,
        },
        Err(e) => Status::NotStarted(format!("cannot wait for `{}`: {e}", binary.display())),
    };
    RawOutcome {
        status,
        stdout,
        stderr,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(list: &[&str]) -> Vec<Token> {
        list.iter().map(|w| Token::Word(w.to_string())).collect()
    }

    #[test]
    fn run_lines_follow_comment_markers_and_continuations() {
        let text = "\
// RUN: tessera run-pass %s | FileCheck %s
# RUN: echo one \\
#   RUN:   two
;; RUN: last
// CHECK: RUN: not a run line
not a comment RUN: x
";
        assert_eq!(
            run_lines(text),
            vec![
                "tessera run-pass %s | FileCheck %s".to_string(),
                "echo one two".to_string(),
                "last".to_string()
            ]
        );
    }

    #[test]
    fn tokenizer_handles_quotes_and_escapes() {
        assert_eq!(
            tokenize("a 'b c' \"d\\\"e\" f\\ g").ok(),
            Some(words(&["a", "b c", "d\"e", "f g"]))
        );
        assert_eq!(
            tokenize("echo 'a|b' \"x && y\"").ok(),
            Some(words(&["echo", "a|b", "x && y"]))
        );
        assert!(tokenize("echo 'oops").is_err());
        assert!(tokenize("echo \"oops").is_err());
    }

    #[test]
    fn tokenizer_handles_operators_and_redirections() {
        let tokens = tokenize("not cmd %s 2>&1 | FileCheck %s && cat<in >out 2>>log; x >&2 &>both");
        let expected = vec![
            Token::Word("not".into()),
            Token::Word("cmd".into()),
            Token::Word("%s".into()),
            Token::Redirect(Redirect::Duplicate { fd: 2, target: 1 }),
            Token::Pipe,
            Token::Word("FileCheck".into()),
            Token::Word("%s".into()),
            Token::And,
            Token::Word("cat".into()),
            Token::Redirect(Redirect::Input("in".into())),
            Token::Redirect(Redirect::Output {
                fd: 1,
                path: "out".into(),
                append: false,
            }),
            Token::Redirect(Redirect::Output {
                fd: 2,
                path: "log".into(),
                append: true,
            }),
            Token::Semicolon,
            Token::Word("x".into()),
            Token::Redirect(Redirect::Duplicate { fd: 1, target: 2 }),
            Token::Redirect(Redirect::Both("both".into())),
        ];
        assert_eq!(tokens, Ok(expected));
        // A digit that is part of a word is not a file descriptor.
        assert_eq!(
            tokenize("echo a2>f").ok(),
            Some(vec![
                Token::Word("echo".into()),
                Token::Word("a2".into()),
                Token::Redirect(Redirect::Output {
                    fd: 1,
                    path: "f".into(),
                    append: false
                }),
            ])
        );
        assert_eq!(
            tokenize("a || b").ok().map(|t| t.contains(&Token::Or)),
            Some(true)
        );
        assert!(tokenize("cmd >").is_err());
        assert!(tokenize("cmd &").is_err());
    }

    #[test]
    fn commands_are_displayed_with_quotes_where_needed() {
        let words: Vec<String> = ["echo", "a b", "it's", "plain"]
            .iter()
            .map(|w| w.to_string())
            .collect();
        assert_eq!(display_command(&words), "echo 'a b' 'it'\\''s' plain");
    }

    #[test]
    fn substitutions_expand_percent_codes() {
        let subs = Substitutions {
            source: "/d/t.hlo".into(),
            source_dir: "/d".into(),
            temp: "/tmp/x/t.hlo.tmp".into(),
            temp_dir: "/tmp/x".into(),
        };
        assert_eq!(
            subs.apply("%s:%S:%t.o:%T:100%%:%z"),
            "/d/t.hlo:/d:/tmp/x/t.hlo.tmp.o:/tmp/x:100%:%z"
        );
    }

    /// A scratch directory holding one test file.
    struct Scratch {
        dir: PathBuf,
    }

    impl Scratch {
        fn new(name: &str) -> Self {
            let dir = std::env::temp_dir()
                .join(format!("filecheck-lit-test-{}-{name}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
            Scratch { dir }
        }

        fn config(&self) -> RunConfig {
            RunConfig {
                tessera_bin: PathBuf::from("echo"),
                extra_tools: vec![("show".to_string(), PathBuf::from("cat"))],
                llvm_filecheck: None,
                cwd: self.dir.clone(),
            }
        }

        fn run(&self, text: &str, cfg: &RunConfig) -> Result<(), RunFailure> {
            let path = self.dir.join("test.hlo");
            std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
            run_file(&path, cfg)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    #[test]
    fn pipes_feed_filecheck() {
        let scratch = Scratch::new("pipes");
        let cfg = scratch.config();
        let ok = "// RUN: echo hello world | FileCheck %s\n// CHECK: hello world\n";
        assert_eq!(scratch.run(ok, &cfg), Ok(()));
        let quoted = "// RUN: echo 'a|b' | filecheck %s\n// CHECK: a|b\n";
        assert_eq!(scratch.run(quoted, &cfg), Ok(()));
        let bad = "// RUN: echo goodbye | FileCheck %s\n// CHECK: hello\n";
        let failure = scratch
            .run(bad, &cfg)
            .err()
            .unwrap_or_else(|| panic!("expected a failure"));
        let shown = failure.to_string();
        assert!(
            shown.contains("RUN: echo goodbye | FileCheck %s"),
            "{shown}"
        );
        assert!(
            shown.contains("error: CHECK: expected string not found in input"),
            "{shown}"
        );
        assert!(
            shown.contains("<stdin>:1:1: note: scanning from here"),
            "{shown}"
        );
        assert_eq!(
            failure.run_line.as_deref(),
            Some("echo goodbye | FileCheck %s")
        );
    }

    #[test]
    fn not_inverts_exit_status() {
        let scratch = Scratch::new("not");
        let cfg = scratch.config();
        assert_eq!(scratch.run("# RUN: not false\n", &cfg), Ok(()));
        assert!(scratch.run("# RUN: not true\n", &cfg).is_err());
        assert!(scratch.run("# RUN: false\n", &cfg).is_err());
        assert_eq!(scratch.run("# RUN: not not true\n", &cfg), Ok(()));
        let mismatch = "// RUN: echo hi | not FileCheck %s\n// CHECK: bye\n";
        assert_eq!(scratch.run(mismatch, &cfg), Ok(()));
        // Like lit, every stage of a pipeline must succeed (pipefail).
        assert!(scratch.run("# RUN: false | true\n", &cfg).is_err());
    }

    #[test]
    fn not_does_not_hide_a_crash() {
        let scratch = Scratch::new("crash");
        let cfg = scratch.config();
        let failure = scratch.run("# RUN: not sh -c 'kill -9 $$'\n", &cfg).err();
        assert_eq!(
            failure.map(|f| f.stages[0].status.clone()),
            Some("killed by a signal".to_string())
        );
    }

    #[test]
    fn stderr_redirection_and_files() {
        let scratch = Scratch::new("redirect");
        let cfg = scratch.config();
        let merged = "// RUN: not sh -c 'echo oops >&2; exit 3' 2>&1 | FileCheck %s --check-prefix=ERR\n// ERR: oops\n";
        assert_eq!(scratch.run(merged, &cfg), Ok(()));
        let separate = "// RUN: sh -c 'echo oops >&2' | FileCheck %s --check-prefix=ERR --allow-empty\n// ERR: oops\n";
        let failure = scratch
            .run(separate, &cfg)
            .err()
            .unwrap_or_else(|| panic!("expected a failure"));
        assert_eq!(failure.stages[0].stderr, "oops\n");
        let files = "// RUN: echo saved > %t && show < %t | FileCheck %s && echo more >> %t && cat %t | FileCheck %s --check-prefix=BOTH\n// CHECK: saved\n// BOTH: saved\n// BOTH-NEXT: more\n";
        assert_eq!(scratch.run(files, &cfg), Ok(()));
        let chained = "// RUN: false || echo rescued | FileCheck %s\n// CHECK: rescued\n";
        assert_eq!(scratch.run(chained, &cfg), Ok(()));
    }

    #[test]
    fn tessera_and_tools_resolve_from_config() {
        let scratch = Scratch::new("tools");
        let cfg = scratch.config();
        // `tessera` is `echo` in this configuration.
        let text = "// RUN: tessera from-tessera | FileCheck %s\n// CHECK: from-tessera\n";
        assert_eq!(scratch.run(text, &cfg), Ok(()));
        let missing = scratch.run("// RUN: no-such-tool-xyz\n", &cfg).err();
        assert!(missing.is_some_and(|f| {
            f.stages[0]
                .status
                .starts_with("cannot run `no-such-tool-xyz`")
        }));
    }

    #[test]
    fn llvm_referee_must_agree() {
        let scratch = Scratch::new("referee");
        let mut cfg = scratch.config();
        let text = "// RUN: echo x | FileCheck %s\n// CHECK: x\n";
        // Stand-ins for LLVM's binary: `true` agrees with a pass, `false`
        // disagrees with it.
        cfg.llvm_filecheck = Some(PathBuf::from("true"));
        assert_eq!(scratch.run(text, &cfg), Ok(()));
        cfg.llvm_filecheck = Some(PathBuf::from("false"));
        let failure = scratch
            .run(text, &cfg)
            .err()
            .unwrap_or_else(|| panic!("expected a disagreement"));
        assert!(
            failure
                .to_string()
                .contains("LLVM FileCheck (false) disagrees"),
            "{failure}"
        );
    }

    #[test]
    fn files_without_run_lines_fail() {
        let scratch = Scratch::new("norun");
        let failure = scratch.run("// CHECK: x\n", &scratch.config()).err();
        assert_eq!(
            failure.map(|f| f.reason),
            Some("the test has no RUN: lines".to_string())
        );
    }
}
