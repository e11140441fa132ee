//! Typed ids of the pass's problem, and the vectors they index.
//!
//! Each id is a newtype over the smallest integer that holds it (a value's
//! layout id stays 16-bit: labels, needs and caches hold millions of them
//! on large modules), and a per-value or per-relation vector is a
//! [`TiVec`] keyed by its id, so indexing one kind of vector with another
//! kind's id does not compile.

use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};

use smallvec::{Array, SmallVec};
pub use typed_index_collections::{TiSlice, TiVec};

/// Defines an id: a newtype over `$raw` that converts to and from `usize`
/// (what [`TiVec`] indexes with), ordered as its integer.
macro_rules! id {
    ($(#[$doc:meta])* $name:ident($raw:ty)) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name($raw);

        impl $name {
            /// The id with this index. Ids are dense and counted from 0,
            /// so an index past the raw type's range is a bug.
            #[inline]
            pub fn new(index: usize) -> Self {
                debug_assert!(index <= <$raw>::MAX as usize, "{} overflows", stringify!($name));
                $name(index as $raw)
            }

            /// The id's index.
            #[inline]
            pub const fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl From<usize> for $name {
            #[inline]
            fn from(index: usize) -> Self {
                $name::new(index)
            }
        }

        impl From<$name> for usize {
            #[inline]
            fn from(id: $name) -> usize {
                id.index()
            }
        }
    };
}

id! {
    /// A value of one computation's problem (`Problem::values`).
    ValueId(u32)
}

id! {
    /// An entry of one value's table of layouts (`Value::layouts`).
    LayoutId(u16)
}

id! {
    /// A layout of the computation's `LayoutTable`.
    LayoutKey(u32)
}

id! {
    /// A relation of the problem (`Problem::relations`).
    RelationId(u32)
}

id! {
    /// An op that may re-tile (`Problem::retilings`).
    RetileId(u32)
}

id! {
    /// A group of values the solver moves together (a component or an
    /// atom, see `solve::groups`).
    GroupId(u32)
}

id! {
    /// A matrix need (`Problem::matrix_needs`).
    MatrixId(u32)
}

/// `n` empty lists, made in place. `vec![SmallVec::new(); n]` clones
/// the first list into every slot through `SmallVec`'s `Clone`, which
/// goes through an iterator: some fifty instructions a slot, over a
/// hundred thousand slots a run of the transformer.
pub fn empty_lists<A: Array>(n: usize) -> Vec<SmallVec<A>> {
    let mut lists = Vec::with_capacity(n);
    lists.resize_with(n, SmallVec::new);
    lists
}

/// A [`SmallVec`] indexed by an id: a value's own small tables (its
/// layouts and their storage bytes, indexed by [`LayoutId`]) stay inline
/// as before, and index like a [`TiVec`].
pub struct TiSmallVec<K, A: Array> {
    raw: SmallVec<A>,
    _key: PhantomData<fn(K) -> K>,
}

impl<K, A: Array> TiSmallVec<K, A> {
    /// An empty table.
    pub fn new() -> Self {
        TiSmallVec {
            raw: SmallVec::new(),
            _key: PhantomData,
        }
    }

    /// Appends `item` and returns its id.
    pub fn push_and_get_key(&mut self, item: A::Item) -> K
    where
        K: From<usize>,
    {
        self.raw.push(item);
        K::from(self.raw.len() - 1)
    }
}

impl<K, A: Array> Clone for TiSmallVec<K, A>
where
    A::Item: Clone,
{
    fn clone(&self) -> Self {
        TiSmallVec {
            raw: self.raw.clone(),
            _key: PhantomData,
        }
    }
}

impl<K, A: Array> Default for TiSmallVec<K, A> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K, A: Array> std::fmt::Debug for TiSmallVec<K, A>
where
    A::Item: std::fmt::Debug,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.raw.fmt(f)
    }
}

impl<K, A: Array> Deref for TiSmallVec<K, A> {
    type Target = TiSlice<K, A::Item>;

    #[inline]
    fn deref(&self) -> &Self::Target {
        TiSlice::from_ref(&self.raw)
    }
}

impl<K, A: Array> DerefMut for TiSmallVec<K, A> {
    #[inline]
    fn deref_mut(&mut self) -> &mut Self::Target {
        TiSlice::from_mut(&mut self.raw)
    }
}

impl<K, A: Array> FromIterator<A::Item> for TiSmallVec<K, A> {
    fn from_iter<I: IntoIterator<Item = A::Item>>(iter: I) -> Self {
        TiSmallVec {
            raw: iter.into_iter().collect(),
            _key: PhantomData,
        }
    }
}
