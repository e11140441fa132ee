//! The parallel half of the parser: a large module's computations, found
//! by a quick guess while the outline scan runs, parsed on the rayon pool,
//! and a computation too large for one core cut into pieces that other
//! cores read ahead.
//!
//! Everything here only decides *who* parses what and *when*; what a
//! computation parses to is [`CompParser`]'s, so the module and its errors
//! are exactly the sequential ones (see the parent module).

use std::ops::Range;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use rayon::prelude::*;

use super::names::Stretch;
use super::{
    CompError, CompParser, InstructionReader, ParseOptions, ParsedInstruction, ResolveComputation,
    Resolver, lines_in,
};
use crate::diag::{ParseError, RawError};
use crate::lex::{Cursor, is_ident_continue, is_ident_start};
use crate::outline::{ModuleOutline, outline};
use crate::parallelism::{Parallelism, Split};
use crate::{Computation, InstId};

/// The parallel path. The outline scan is itself a good share of the
/// work, so it runs beside the parsing of the computations, which starts
/// from where they seem to be (see [`guess_computations`]). What was parsed
/// is kept only if the outline finds exactly those computations, by name
/// and extent; then it is what parsing from the outline gives, since a
/// computation's parse depends only on its text and the names of all
/// computations. Otherwise the computations are parsed again from the
/// outline.
pub(super) fn parse_in_parallel(
    text: &str,
    file_name: &str,
    options: &ParseOptions,
) -> Result<(ModuleOutline, Result<Vec<Computation>, CompError>), ParseError> {
    let (outline, (guess, parsed)) = rayon::join(
        || outline(text, file_name),
        || {
            let guess = guess_computations(text);
            let spans: Vec<Range<usize>> = guess.iter().map(|(_, span)| span.clone()).collect();
            let names = guess.iter().map(|&(name, _)| name);
            let parsed = parse_spans(text, &spans, names, options);
            (guess, parsed)
        },
    );
    let outline = outline?;
    let confirmed = outline.computations.len() == guess.len()
        && outline
            .computations
            .iter()
            .zip(&guess)
            .all(|(c, (name, span))| {
                c.name == *name && c.span.start == span.start && c.span.end == span.end
            });
    if confirmed {
        return Ok((outline, parsed));
    }
    let parsed = parse_spans(text, &outline.spans(), outline.names(), options);
    Ok((outline, parsed))
}

/// Parses the computations at `spans` of `text` on the pool; called
/// computations are resolved among `names`, in module order.
fn parse_spans<'t>(
    text: &'t str,
    spans: &[Range<usize>],
    names: impl ExactSizeIterator<Item = &'t str>,
    options: &ParseOptions,
) -> Result<Vec<Computation>, CompError> {
    let resolver = Resolver::new(names);
    Plan::new(text, spans, options).run(text, spans, &|name: &str| resolver.resolve(name))
}

/// One computation's text, parsed as the parallel path parses a large
/// computation of a module: cut into pieces that other threads of the pool
/// read ahead (see [`Plan`]). The result, errors included, is
/// [`CompParser::parse`]'s.
pub(super) fn parse_one_in_parallel(
    text: &str,
    resolve: &ResolveComputation<'_>,
    options: &ParseOptions,
) -> Result<Computation, RawError> {
    let whole = 0..text.len();
    let spans = std::slice::from_ref(&whole);
    let parsed = Plan::new(text, spans, options).run(text, spans, resolve);
    match parsed {
        Ok(mut comps) => comps
            .pop()
            .map_or_else(|| CompParser::parse(text, resolve), Ok),
        Err((_, e)) => Err(e),
    }
}

/// Where the computations seem to be, as XLA prints them: each starts at a
/// line that begins with `%name` or `ENTRY %name` (or the name bare, then
/// `{` or `(`, as the parser also takes it), and ends with the last
/// non-blank byte before the next one; the entry computation comes last
/// and ends with the last non-blank byte of the text, so the lines after
/// its start are not looked at. Only a guess: see [`parse_in_parallel`].
fn guess_computations(text: &str) -> Vec<(&str, Range<usize>)> {
    let bytes = text.as_bytes();
    let mut found: Vec<(&str, Range<usize>)> = Vec::new();
    let line_starts = std::iter::once(0).chain(memchr::memchr_iter(b'\n', bytes).map(|i| i + 1));
    for line in line_starts {
        if !bytes
            .get(line)
            .is_some_and(|&b| b == b'%' || is_ident_start(b))
        {
            continue;
        }
        let mut c = Cursor::new(text);
        c.pos = line;
        let is_entry = c.eat_word(b"ENTRY");
        if is_entry {
            while c.eat(b' ') {}
        }
        let marked = c.peek() == Some(b'%');
        if let Some(name) = c.name()
            && (marked || {
                while c.eat(b' ') {}
                matches!(c.peek(), Some(b'{' | b'('))
            })
        {
            if let Some((_, previous)) = found.last_mut() {
                previous.end = trim_end(bytes, line);
            }
            found.push((name, line..text.len()));
            if is_entry {
                break;
            }
        }
    }
    if let Some((_, last)) = found.last_mut() {
        last.end = trim_end(bytes, text.len());
    }
    found
}

/// `end`, moved back over whitespace.
fn trim_end(bytes: &[u8], mut end: usize) -> usize {
    while end > 0 && matches!(bytes.get(end - 1), Some(b' ' | b'\t' | b'\r' | b'\n')) {
        end -= 1;
    }
    end
}

/// How the parallel path divides a module's computations.
///
/// A computation larger than two grains is cut into pieces of about a
/// grain. One task (the head) parses it from the start, registering its
/// instructions; other tasks read the pieces ahead from the last one
/// backwards. Each piece goes to whichever side claims it first, so the
/// two meet somewhere in the middle without waiting for each other: the
/// head parses an unclaimed piece itself and takes a read piece's
/// instructions, and parses a piece still being read itself too, the
/// reader's work then being lost. Smaller computations are parsed whole,
/// in batches of about half a grain, to keep the number of tasks low.
struct Plan<'a> {
    /// Split computations: (index, the offset the head parses up to).
    heads: Vec<(usize, usize)>,
    /// Runs of small computations, parsed whole: (first, end).
    batches: Vec<(usize, usize)>,
    /// The pieces of the split computations, in text order.
    pieces: Vec<PieceSlot<'a>>,
    /// Testing: read every piece before the heads start.
    read_all_first: bool,
}

/// One piece of a split computation and what became of it.
struct PieceSlot<'a> {
    /// The computation's index.
    comp: usize,
    /// The piece: byte `start` of the computation's text up to the first
    /// instruction boundary at or after `stop`.
    start: usize,
    stop: usize,
    /// Set by whichever side takes the piece on.
    claimed: AtomicBool,
    /// What a reader found, once it is done.
    read: Mutex<Option<Piece<'a>>>,
}

impl PieceSlot<'_> {
    /// True for the first caller only.
    fn claim(&self) -> bool {
        !self.claimed.swap(true, Ordering::AcqRel)
    }
}

impl<'a> Plan<'a> {
    /// The plan for the computations at `spans` of `text`.
    fn new(text: &str, spans: &[Range<usize>], options: &ParseOptions) -> Plan<'a> {
        let forced = options.forced_splits.as_deref();
        // Enough pieces for the pool to balance, few enough that handing
        // them out stays cheap; no smaller than the policy's grain.
        let least =
            Parallelism::splits(Split::ParseText, text.len()).unwrap_or(Split::ParseText.grain());
        let grain = (text.len() / (rayon::current_num_threads() * 16)).max(least);
        let mut plan = Plan {
            heads: Vec::new(),
            batches: Vec::new(),
            pieces: Vec::new(),
            read_all_first: forced.is_some(),
        };
        // The batch being filled: (first, end, bytes).
        let mut batch: Option<(usize, usize, usize)> = None;
        for (i, span) in spans.iter().enumerate() {
            let body = text.get(span.clone()).unwrap_or_default();
            let cuts = match forced {
                Some(offsets) => forced_cuts(offsets, span),
                None if body.len() > 2 * grain => split_points(body, grain),
                None => Vec::new(),
            };
            if !cuts.is_empty() {
                // A split computation ends the batch before it.
                plan.batches
                    .extend(batch.take().map(|(first, end, _)| (first, end)));
                plan.split(i, &cuts);
                continue;
            }
            batch = match batch {
                Some((first, _, bytes)) if bytes < grain / 2 => {
                    Some((first, i + 1, bytes + body.len()))
                }
                done => {
                    plan.batches
                        .extend(done.map(|(first, end, _)| (first, end)));
                    Some((i, i + 1, body.len()))
                }
            };
        }
        plan.batches
            .extend(batch.map(|(first, end, _)| (first, end)));
        plan
    }

    /// Computation `i`, cut at `cuts` (offsets in its text, ascending, at
    /// least one): its head parses up to the first cut, and each cut
    /// starts a piece that ends at the next.
    fn split(&mut self, i: usize, cuts: &[usize]) {
        let Some(&first) = cuts.first() else {
            return;
        };
        self.heads.push((i, first));
        for (k, &start) in cuts.iter().enumerate() {
            let stop = cuts.get(k + 1).copied().unwrap_or(usize::MAX);
            self.pieces.push(PieceSlot {
                comp: i,
                start,
                stop,
                claimed: AtomicBool::new(false),
                read: Mutex::new(None),
            });
        }
    }

    /// Parses the computations on the pool, resolving called computations'
    /// names with `resolve`.
    fn run(
        &self,
        text: &'a str,
        spans: &[Range<usize>],
        resolve: &ResolveComputation<'_>,
    ) -> Result<Vec<Computation>, CompError> {
        let src = Source {
            text,
            spans,
            resolve,
        };
        // A shared countdown over the pieces makes each slot looked at
        // once in all (see `read_ahead`).
        let unvisited = AtomicUsize::new(self.pieces.len());
        let read_one = |_: usize| self.read_ahead(&src, &unvisited);
        if self.read_all_first {
            (0..self.pieces.len())
                .into_par_iter()
                .with_max_len(1)
                .for_each(read_one);
        }
        // The heads start at once. The other threads first read pieces
        // ahead, because a head must register what was read after parsing
        // everything before it, and only then parse the small computations,
        // which the heads' threads help with once they are done. Each read
        // and each batch is its own task, so that the pool can balance them.
        let (heads, batches) = rayon::join(
            || {
                self.heads
                    .par_iter()
                    .with_max_len(1)
                    .map(|&(i, stop)| (i, self.head(&src, i, stop)))
                    .collect::<Vec<_>>()
            },
            || {
                let ((), batches) = rayon::join(
                    || {
                        (0..self.pieces.len())
                            .into_par_iter()
                            .with_max_len(1)
                            .for_each(read_one)
                    },
                    || {
                        self.batches
                            .par_iter()
                            .with_max_len(1)
                            .map(|&(first, end)| batch(&src, first, end))
                            .collect::<Vec<_>>()
                    },
                );
                batches
            },
        );
        let parsed = heads.into_iter().chain(batches.into_iter().flatten());
        in_text_order(&src, parsed)
    }

    /// A reader's task: the last piece nobody has claimed yet, read ahead,
    /// so that the readers work backwards towards the heads.
    fn read_ahead(&self, src: &Source<'a, '_>, unvisited: &AtomicUsize) {
        while let Ok(k) =
            unvisited.fetch_update(Ordering::AcqRel, Ordering::Acquire, |k| k.checked_sub(1))
        {
            let Some(slot) = self.pieces.get(k - 1) else {
                return;
            };
            if slot.claim() {
                let piece =
                    read_piece(src.comp_text(slot.comp), src.resolve, slot.start, slot.stop);
                if let Ok(mut read) = slot.read.lock() {
                    *read = Some(piece);
                }
                return;
            }
        }
    }

    /// A head's task: split computation `i`, parsed from its start, its
    /// own part up to `stop`.
    fn head(&self, src: &Source<'a, '_>, i: usize, stop: usize) -> Result<Computation, RawError> {
        let pieces: Vec<&PieceSlot<'a>> = self.pieces.iter().filter(|p| p.comp == i).collect();
        CompParser::parse_split(src.comp_text(i), src.resolve, stop, &pieces)
    }
}

/// What every task of [`Plan::run`] reads: the module text, the
/// computations' spans and the names of all computations.
struct Source<'a, 's> {
    text: &'a str,
    spans: &'s [Range<usize>],
    resolve: &'s ResolveComputation<'s>,
}

impl<'a> Source<'a, '_> {
    /// The text of computation `i`.
    fn comp_text(&self, i: usize) -> &'a str {
        self.spans
            .get(i)
            .and_then(|s| self.text.get(s.clone()))
            .unwrap_or_default()
    }
}

/// The cuts a test forces into the computation at `span`, as offsets in
/// its text: those strictly inside it, ascending, once each.
fn forced_cuts(offsets: &[usize], span: &Range<usize>) -> Vec<usize> {
    let mut cuts: Vec<usize> = offsets
        .iter()
        .filter(|&&o| o > span.start && o < span.end)
        .map(|&o| o - span.start)
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

/// A batch's task: small computations `first..end`, parsed whole, up to
/// the first error, after which nothing can matter (errors are reported
/// in text order).
fn batch(
    src: &Source<'_, '_>,
    first: usize,
    end: usize,
) -> Vec<(usize, Result<Computation, RawError>)> {
    let mut parsed = Vec::with_capacity(end - first);
    for i in first..end {
        let result = CompParser::parse(src.comp_text(i), src.resolve);
        let failed = result.is_err();
        parsed.push((i, result));
        if failed {
            break;
        }
    }
    parsed
}

/// The parsed computations in text order, or the first error in that
/// order: the sequential result.
fn in_text_order(
    src: &Source<'_, '_>,
    parsed: impl Iterator<Item = (usize, Result<Computation, RawError>)>,
) -> Result<Vec<Computation>, CompError> {
    let mut results: Vec<Option<Result<Computation, RawError>>> =
        (0..src.spans.len()).map(|_| None).collect();
    for (i, result) in parsed {
        if let Some(slot) = results.get_mut(i) {
            *slot = Some(result);
        }
    }
    let mut computations = Vec::with_capacity(src.spans.len());
    for (i, result) in results.into_iter().enumerate() {
        // Every computation before the first error has a result; a
        // missing one would be a bug here, and parsing it again keeps
        // even that from giving a wrong module.
        let result = result.unwrap_or_else(|| CompParser::parse(src.comp_text(i), src.resolve));
        computations.push(result.map_err(|e| (i, e))?);
    }
    Ok(computations)
}

/// Where to cut the text of a large computation: every `grain` bytes, at
/// the start of the next line that looks like an instruction (indentation,
/// then `%` or `ROOT`). This is a guess, never trusted: a line inside a
/// multi-line literal, string or comment can look the same, and the parser
/// checks that it really reaches each cut at an instruction boundary before
/// it uses what was read from there.
fn split_points(body: &str, grain: usize) -> Vec<usize> {
    let bytes = body.as_bytes();
    let mut cuts = Vec::with_capacity(bytes.len() / grain.max(1) + 1);
    let mut target = grain;
    while let Some(at) = instruction_line_at_or_after(bytes, target) {
        cuts.push(at);
        target = at + grain.max(1);
    }
    cuts
}

/// The offset of the first indented line beginning after `from` that
/// starts like an instruction: `ROOT`, `%`, or a bare name followed by
/// ` = ` (XLA prints names with `%`; the parser, and the scaling benchmark's
/// modules, take them without it too, and a guess that only knew `%` cut
/// a computation of a million bare-named instructions nowhere).
fn instruction_line_at_or_after(bytes: &[u8], from: usize) -> Option<usize> {
    let mut line = from;
    loop {
        line += memchr::memchr(b'\n', bytes.get(line..)?)? + 1;
        let rest = bytes.get(line..)?;
        let indent = rest.iter().position(|&b| b != b' ' && b != b'\t')?;
        let rest = rest.get(indent..).unwrap_or_default();
        if indent > 0 && starts_like_an_instruction(rest) {
            return Some(line + indent);
        }
    }
}

/// True when `line` starts with `ROOT`, `%`, or a bare name and ` = `,
/// as XLA spaces it (an attribute wrapped onto its own line, `key=value`,
/// is not taken).
fn starts_like_an_instruction(line: &[u8]) -> bool {
    let word = line.iter().take_while(|&&b| is_ident_continue(b)).count();
    match line.first() {
        Some(b'%') => true,
        Some(&b) if is_ident_start(b) => {
            let name = line.get(..word).unwrap_or_default();
            name == b"ROOT" || line.get(word..).is_some_and(|a| a.starts_with(b" = "))
        }
        _ => false,
    }
}

/// The instructions read from one piece of a computation's body, from its
/// start up to where the reading stopped: at the first instruction
/// boundary at or after the piece's stop, at the closing `}`, at the end of
/// the text, or at an error.
struct Piece<'a> {
    start: usize,
    instructions: Vec<ParsedInstruction<'a>>,
    /// Their names, and their operands defined earlier in the piece, in a
    /// computation large enough for tables of its own (see
    /// [`Stretch::worth_it`]).
    names: Option<Stretch<'a>>,
    end: usize,
    /// The error that stopped the reading, after `instructions`.
    error: Option<RawError>,
}

/// Reads the instructions of `text` (a computation's text) from byte
/// `start`, as [`CompParser::body`] would, without registering them.
fn read_piece<'a>(
    text: &'a str,
    resolve: &ResolveComputation<'_>,
    start: usize,
    stop: usize,
) -> Piece<'a> {
    let mut r = InstructionReader::new(text, resolve);
    r.c.pos = start;
    let lines = lines_in(text, start..stop);
    let mut instructions = Vec::with_capacity(lines);
    let mut names = Stretch::worth_it(text.len()).then(|| Stretch::with_capacity(lines));
    let error = loop {
        if let Err(e) = r.c.skip_trivia() {
            break Some(e);
        }
        if r.c.pos >= stop || matches!(r.c.peek(), None | Some(b'}')) {
            break None;
        }
        match r.instruction() {
            Ok(inst) => {
                if let Some(names) = &mut names {
                    for &(operand, _) in &inst.operands {
                        names.resolve_operand(operand);
                    }
                    names.define(inst.name, instructions.len() as u32);
                }
                instructions.push(inst);
            }
            Err(e) => break Some(e),
        }
    };
    Piece {
        start,
        instructions,
        names,
        end: r.c.pos,
        error,
    }
}

impl<'a, 'r> CompParser<'a, 'r> {
    /// Parses a computation's text that was cut at the starts of `pieces`,
    /// which other threads may be reading ahead. Gives exactly what
    /// [`CompParser::parse`] gives: a piece's instructions are used only
    /// when this parser, having parsed everything before, reaches the
    /// piece's start at an instruction boundary; they are then registered
    /// in order as if just read. When anything fails (an error in the
    /// text, or a name defined twice, which the pieces' own name tables
    /// cannot see, see [`names`](super::names)), the computation is parsed
    /// again in one go, so that the error is the sequential one.
    fn parse_split(
        text: &'a str,
        resolve: &'r ResolveComputation<'r>,
        first_stop: usize,
        pieces: &[&PieceSlot<'a>],
    ) -> Result<Computation, RawError> {
        match CompParser::parse_pieces(text, resolve, first_stop, pieces) {
            Some(comp) => Ok(comp),
            None => CompParser::parse(text, resolve),
        }
    }

    /// [`CompParser::parse_split`]'s work, or `None` when it must parse
    /// again in one go.
    fn parse_pieces(
        text: &'a str,
        resolve: &'r ResolveComputation<'r>,
        first_stop: usize,
        pieces: &[&PieceSlot<'a>],
    ) -> Option<Computation> {
        let own_tables = Stretch::worth_it(text.len());
        let mut p = CompParser::new(text, resolve, first_stop);
        let signature = p.open().ok()?;
        let mut closed = p.body(first_stop).ok()?;
        for slot in pieces {
            if closed {
                break;
            }
            // A piece's names go in the current table, or in one of their
            // own once it is full (see `names`).
            let mut taken = false;
            if !slot.claim() {
                // Taken by a reader: use what it read if it is done and
                // this parser stands exactly where the reading began.
                let read = slot.read.lock().ok().and_then(|mut read| read.take());
                if let Some(piece) = read.filter(|piece| piece.start == p.r.c.pos) {
                    if piece.error.is_some() || piece.names.as_ref().is_some_and(|n| n.duplicate) {
                        return None;
                    }
                    p.register_piece(piece)?;
                    taken = true;
                }
            }
            if !taken && own_tables {
                p.names.make_room(lines_in(text, slot.start..slot.stop));
            }
            // Whatever is left of the piece (all of it, unless it was read
            // ahead) is parsed here.
            closed = p.body(slot.stop).ok()?;
        }
        if !closed {
            p.body(usize::MAX).ok()?;
        }
        if !p.names.distinct() {
            return None;
        }
        p.close(signature).ok()
    }

    /// Registers the instructions a reader read, in order, and adds the
    /// piece's names; the parser then stands where the reading ended.
    fn register_piece(&mut self, piece: Piece<'a>) -> Option<()> {
        let Piece {
            instructions,
            end,
            names,
            ..
        } = piece;
        let Some(names) = names else {
            // A smaller computation's names stay in one table, as if read
            // here.
            for inst in instructions {
                self.register(inst, None).ok()?;
            }
            self.r.c.pos = end;
            return Some(());
        };
        let base = InstId::new(self.comp.len());
        let mut operands = names.operands.as_slice();
        for inst in instructions {
            let (these, rest) = operands.split_at_checked(inst.operands.len())?;
            operands = rest;
            self.register(inst, Some((base, these))).ok()?;
        }
        if !self.names.add_read(names, base) {
            return None;
        }
        self.r.c.pos = end;
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The guess finds computations as XLA prints them, and the plan
    /// parses each exactly once: whole in a batch, or as a head.
    #[test]
    fn plans_cover_each_computation_once() {
        let text = "HloModule m\n\n%a {\n  ROOT %x = f32[] constant(0)\n}\n\n\
                    %b (p: f32[]) -> f32[] {\n  %p = f32[] parameter(0)\n  ROOT %n = f32[] negate(%p)\n}\n\n\
                    %c {\n  ROOT %y = f32[] constant(1)\n}\n\n\
                    ENTRY %main {\n  ROOT %z = f32[] constant(2)\n}\n";
        let guess = guess_computations(text);
        let names: Vec<&str> = guess.iter().map(|(name, _)| *name).collect();
        assert_eq!(names, ["a", "b", "c", "main"]);
        let outline = outline(text, "t").unwrap();
        for (c, (_, span)) in outline.computations.iter().zip(&guess) {
            assert_eq!(c.span.start..c.span.end, *span);
        }
        let spans: Vec<Range<usize>> = guess.into_iter().map(|(_, span)| span).collect();
        let inside_b = spans[1].start + text[spans[1].clone()].find("ROOT").unwrap();
        for cuts in [vec![], vec![inside_b], vec![spans[3].start + 8]] {
            let options = ParseOptions {
                forced_splits: Some(cuts.clone()),
            };
            let plan = Plan::new(text, &spans, &options);
            let mut seen = vec![0; spans.len()];
            for &(first, end) in &plan.batches {
                (first..end).for_each(|i| seen[i] += 1);
            }
            plan.heads.iter().for_each(|&(i, _)| seen[i] += 1);
            assert_eq!(seen, [1, 1, 1, 1], "cuts {cuts:?}");
        }
    }

    /// Names without `%`, which the parser takes: the guess finds such
    /// computations and the cuts fall on such instructions, so that a
    /// large computation of them is read on several threads. Lines that
    /// only look a little like them (a literal's rows, a header line, a
    /// wrapped attribute) are not taken.
    #[test]
    fn bare_names_are_found_and_cut_at() {
        let text = "HloModule m, entry_computation_layout={()->f32[2]{0}}\n\n\
                    add (x: f32[], y: f32[]) -> f32[] {\n  x = f32[] parameter(0)\n  \
                    y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n\n\
                    ENTRY main {\n  k = f32[2] constant({\n  1, 2 })\n  \
                    n = f32[2] negate(k), metadata={op_name=\"a\"\n  op_type=\"b\"}\n  \
                    ROOT r = f32[2] abs(n)\n}\n";
        let guess = guess_computations(text);
        let names: Vec<&str> = guess.iter().map(|(name, _)| *name).collect();
        assert_eq!(names, ["add", "main"]);
        let outline = outline(text, "t").unwrap();
        for (c, (_, span)) in outline.computations.iter().zip(&guess) {
            assert_eq!(c.span.start..c.span.end, *span);
        }
        let body = &text[guess[1].1.clone()];
        let cut_lines: Vec<&str> = split_points(body, 1)
            .into_iter()
            .map(|at| body[at..].lines().next().unwrap())
            .collect();
        assert_eq!(
            cut_lines,
            [
                "k = f32[2] constant({",
                "n = f32[2] negate(k), metadata={op_name=\"a\"",
                "ROOT r = f32[2] abs(n)"
            ]
        );
    }
}
