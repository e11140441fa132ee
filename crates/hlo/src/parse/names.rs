//! The instruction names of one computation being parsed, by stretch of
//! its text.
//!
//! A computation is one name space, but a large one that the parallel
//! path cuts into pieces (see `parallel.rs`) keeps its names in several
//! tables, one per stretch of up to [`TABLE_NAMES`] names; a computation
//! parsed in one go, or a smaller one, keeps one. A single table for a
//! computation of a million instructions is some 24 MB that
//! every definition and every operand reaches at a random place, missing
//! the cache almost every time: the parse of a 1e6-instruction
//! computation spent 23% of its samples inserting names, against 4% at
//! 1e5. A piece's table is small, and it is filled by the thread that
//! reads the piece ahead, which also resolves the operands defined
//! earlier in the piece (most of them). What is left for the registering
//! thread in text order is looking up the few names that cross a stretch.
//!
//! A table takes stretches until it holds [`TABLE_NAMES`] names. Tables
//! cannot see a name defined in two of them. So a computation of several
//! tables is checked once at its end ([`InstNames::distinct`]),
//! and the parallel path parses it again in one go when that check, or
//! anything else, fails, so that its errors stay the sequential ones.

use std::hash::BuildHasher;

use rayon::prelude::*;
use rustc_hash::{FxBuildHasher, FxHashMap};

use crate::InstId;

/// The most names a table takes before a new one starts (1.5 MB of
/// entries, about what one core's L2 cache holds): a computation of up to
/// this many instructions has one table, as it would without stretches,
/// and needs no check at its end.
const TABLE_NAMES: usize = 1 << 16;

/// No instruction of the stretch defines the operand (see
/// [`Stretch::resolve_operand`]).
pub(super) const NOT_LOCAL: u32 = u32::MAX;

/// The names defined in one stretch of a computation's text, each with its
/// instruction's position counted from the stretch's first.
#[derive(Default)]
pub(super) struct Stretch<'a> {
    names: FxHashMap<&'a str, u32>,
    /// The operands resolved within the stretch, in reading order: each
    /// the position of its definition, or [`NOT_LOCAL`].
    pub(super) operands: Vec<u32>,
    /// A name defined twice within the stretch.
    pub(super) duplicate: bool,
}

impl<'a> Stretch<'a> {
    /// True when a computation of `bytes` of text is likely to need more
    /// than one table ([`TABLE_NAMES`] instructions of 48 bytes), so that
    /// its pieces' readers resolve names in their own: in a smaller one,
    /// which one table serves from the cache, that only slowed the
    /// readers (the 24-layer transformer's parse took 7% longer).
    pub(super) fn worth_it(bytes: usize) -> bool {
        bytes / 48 > TABLE_NAMES
    }

    /// An empty stretch with room for about `names` definitions.
    pub(super) fn with_capacity(names: usize) -> Self {
        let mut stretch = Stretch::default();
        stretch.names.reserve(names);
        stretch
    }

    /// Records where operand `name` of the instruction being read is
    /// defined, if earlier in this stretch.
    pub(super) fn resolve_operand(&mut self, name: &str) {
        let at = self.names.get(name).copied().unwrap_or(NOT_LOCAL);
        self.operands.push(at);
    }

    /// Records that the stretch's `position`th instruction defines `name`.
    pub(super) fn define(&mut self, name: &'a str, position: u32) {
        if self.names.insert(name, position).is_some() {
            self.duplicate = true;
        }
    }
}

/// A stretch whose first instruction has id `base`.
struct Placed<'a> {
    base: u32,
    names: FxHashMap<&'a str, u32>,
}

impl Placed<'_> {
    fn get(&self, name: &str) -> Option<InstId> {
        let at = *self.names.get(name)?;
        Some(InstId::new(self.base.checked_add(at)? as usize))
    }
}

/// A computation's instruction names: the stretch being parsed here, and
/// the stretches before and, once the body is read, after it.
pub(super) struct InstNames<'a> {
    /// The stretch being parsed here, by id (its base is 0).
    current: FxHashMap<&'a str, u32>,
    placed: Vec<Placed<'a>>,
    /// The table in `placed` where a name was last found.
    last: usize,
    /// [`TABLE_NAMES`], but in tests.
    limit: usize,
}

impl<'a> InstNames<'a> {
    /// One stretch, with room for about `names` definitions.
    pub(super) fn with_capacity(names: usize) -> Self {
        let mut current = FxHashMap::default();
        current.reserve(names);
        InstNames {
            current,
            placed: Vec::new(),
            last: 0,
            limit: TABLE_NAMES,
        }
    }

    /// Records that `id` defines `name`; false when the current stretch
    /// already defines it.
    #[inline]
    pub(super) fn define(&mut self, name: &'a str, id: InstId) -> bool {
        self.current.insert(name, id.index() as u32).is_none()
    }

    /// The instruction that defines `name`, among those recorded.
    #[inline]
    pub(super) fn find(&mut self, name: &'a str) -> Option<InstId> {
        if let Some(&id) = self.current.get(name) {
            return Some(InstId::new(id as usize));
        }
        if self.placed.is_empty() {
            return None;
        }
        self.find_placed(name)
    }

    /// [`InstNames::find`] in the tables before the current one: first the
    /// one the last such name was found in, since operands that cross
    /// tables tend to come in runs from one place (a value many
    /// instructions read; a tuple of a whole stretch's results), then the
    /// others, newest first.
    fn find_placed(&mut self, name: &'a str) -> Option<InstId> {
        if let Some(id) = self.placed.get(self.last).and_then(|s| s.get(name)) {
            return Some(id);
        }
        let (at, id) = self
            .placed
            .iter()
            .enumerate()
            .rev()
            .filter(|&(at, _)| at != self.last)
            .find_map(|(at, s)| Some((at, s.get(name)?)))?;
        self.last = at;
        Some(id)
    }

    /// Makes room for about `names` more definitions: in the current
    /// table while it stays within [`TABLE_NAMES`], else in a new one.
    pub(super) fn make_room(&mut self, names: usize) {
        if self.current.len() + names > self.limit && !self.current.is_empty() {
            let mut next = FxHashMap::default();
            next.reserve(names);
            let names = std::mem::replace(&mut self.current, next);
            self.placed.push(Placed { base: 0, names });
        } else {
            self.current.reserve(names);
        }
    }

    /// Adds a stretch read elsewhere whose first instruction has id
    /// `base`: into the current table while it stays within
    /// [`TABLE_NAMES`] (false when a name is then defined twice), else as
    /// a table of its own, after which a new current one starts.
    pub(super) fn add_read(&mut self, stretch: Stretch<'a>, base: InstId) -> bool {
        let base = base.index() as u32;
        if self.current.len() + stretch.names.len() <= self.limit {
            self.current.reserve(stretch.names.len());
            return stretch.names.into_iter().all(|(name, at)| {
                let id = base.saturating_add(at);
                self.current.insert(name, id).is_none()
            });
        }
        if !self.current.is_empty() {
            let names = std::mem::take(&mut self.current);
            self.placed.push(Placed { base: 0, names });
        }
        self.placed.push(Placed {
            base,
            names: stretch.names,
        });
        true
    }

    /// True when no name is defined in two stretches (a table keeps one
    /// definition of each name, so one stretch's own duplicates are found
    /// as it is filled). The names' hashes are sorted and compared: a
    /// table holding every name to check would be the cache-missing
    /// table the stretches avoid. Two names with the same hash count as
    /// the same, which costs at worst a second parse.
    pub(super) fn distinct(&self) -> bool {
        if self.placed.is_empty() {
            return true;
        }
        let tables: Vec<&FxHashMap<&str, u32>> = std::iter::once(&self.current)
            .chain(self.placed.iter().map(|s| &s.names))
            .collect();
        let mut hashes: Vec<u64> = tables
            .par_iter()
            .flat_map_iter(|names| names.keys().map(|name| FxBuildHasher.hash_one(name)))
            .collect();
        hashes.par_sort_unstable();
        !hashes.par_windows(2).any(|w| matches!(w, [a, b] if a == b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(i: usize) -> InstId {
        InstId::new(i)
    }

    fn names(limit: usize) -> InstNames<'static> {
        InstNames {
            limit,
            ..InstNames::with_capacity(4)
        }
    }

    /// `names` read as one stretch: each defined after its operands are
    /// resolved.
    fn read(defs: &[(&'static str, &[&'static str])]) -> Stretch<'static> {
        let mut stretch = Stretch::with_capacity(defs.len());
        for (at, (name, operands)) in defs.iter().enumerate() {
            operands.iter().for_each(|o| stretch.resolve_operand(o));
            stretch.define(name, at as u32);
        }
        stretch
    }

    #[test]
    fn names_are_found_in_every_table_and_placed_by_base() {
        for limit in [1, TABLE_NAMES] {
            let mut names = names(limit);
            assert!(names.define("p", id(0)));
            assert!(!names.define("p", id(0)), "a duplicate in one table");
            let piece = read(&[("a", &["p"]), ("b", &["a"])]);
            assert_eq!(piece.operands, [NOT_LOCAL, 0]);
            assert!(names.add_read(piece, id(1)));
            names.make_room(1);
            assert!(names.define("c", id(3)));
            assert_eq!(names.placed.is_empty(), limit == TABLE_NAMES);
            assert_eq!(names.find("p"), Some(id(0)));
            assert_eq!(names.find("a"), Some(id(1)));
            assert_eq!(names.find("b"), Some(id(2)));
            assert_eq!(names.find("c"), Some(id(3)));
            assert_eq!(names.find("d"), None);
            assert!(names.distinct());
        }
    }

    #[test]
    fn a_name_defined_twice_is_found_in_one_table_or_by_the_check() {
        // Merged into one table, the second definition is refused at once.
        let mut one = names(TABLE_NAMES);
        one.define("x", id(0));
        assert!(!one.add_read(read(&[("x", &[])]), id(1)));
        // In tables of their own, the check at the end finds it.
        let mut several = names(1);
        several.define("x", id(0));
        several.make_room(1);
        several.define("y", id(1));
        assert!(several.distinct());
        assert!(several.add_read(read(&[("x", &[])]), id(2)));
        assert!(!several.distinct());
        // Within one stretch read elsewhere.
        assert!(read(&[("z", &[]), ("z", &[])]).duplicate);
        assert!(!read(&[("z", &[]), ("w", &["z"])]).duplicate);
    }
}
