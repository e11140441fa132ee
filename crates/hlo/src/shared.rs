//! One copy of equal values across the process, for as long as something
//! holds it.
//!
//! A session keeps small values of every computation (signature stubs,
//! relayout reports), and a module repeats the same few shapes and
//! movements in computation after computation: the generated module of
//! 16,667 computations has the same parameter and root shapes in each,
//! and a transformer's reduction regions all take two scalars. Each
//! computation's steps run on their own (in parallel, and again after an
//! edit), so they cannot share what they make by passing it along; a
//! [`WeakCache`] lets each find a live copy made by another.
//!
//! The cache holds its values weakly, so that it keeps nothing alive: a
//! value lives as long as the last holder outside the cache. Its keys are
//! held strongly, and the entries whose values are gone are dropped
//! whenever a shard has doubled since its last sweep, which keeps each
//! shard within about twice the live values.

use std::borrow::Cow;
use std::hash::{BuildHasher, Hash};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use rustc_hash::{FxBuildHasher, FxHashMap};

/// A value the cache can hold weakly: a strong handle and its weak form.
pub trait Downgrade: Sized {
    /// What the cache holds.
    type Weak;
    /// The weak form of `self`.
    fn downgrade(&self) -> Self::Weak;
    /// The value again, if something still holds it.
    fn upgrade(weak: &Self::Weak) -> Option<Self>;
    /// Whether something still holds it (without making a strong handle,
    /// whose drop could be the last).
    fn is_live(weak: &Self::Weak) -> bool;
}

impl<T: ?Sized> Downgrade for Arc<T> {
    type Weak = Weak<T>;

    fn downgrade(&self) -> Weak<T> {
        Arc::downgrade(self)
    }

    fn upgrade(weak: &Weak<T>) -> Option<Arc<T>> {
        weak.upgrade()
    }

    fn is_live(weak: &Weak<T>) -> bool {
        weak.strong_count() > 0
    }
}

/// Shards, so that threads making values at once rarely wait for each
/// other.
const SHARDS: usize = 8;

/// Below this many entries a shard is never swept.
const SWEEP_FLOOR: usize = 64;

/// A process-wide map from keys to weakly held values (see the module
/// docs). Meant for a `static`.
pub struct WeakCache<K, V: Downgrade> {
    shards: [Mutex<Shard<K, V::Weak>>; SHARDS],
}

struct Shard<K, W> {
    map: FxHashMap<K, W>,
    /// The map's length after its last sweep.
    swept_at: usize,
}

impl<K: Hash + Eq, V: Downgrade> WeakCache<K, V> {
    /// An empty cache.
    pub const fn new() -> Self {
        WeakCache {
            shards: [const {
                Mutex::new(Shard {
                    map: FxHashMap::with_hasher(FxBuildHasher),
                    swept_at: 0,
                })
            }; SHARDS],
        }
    }

    fn shard(&self, key: &K) -> MutexGuard<'_, Shard<K, V::Weak>> {
        // The high bits: the map's own probing uses the low ones.
        let hash = FxBuildHasher.hash_one(key);
        let i = (hash >> 60) as usize % SHARDS;
        // A shard is consistent between any two statements that touch it,
        // so a panic elsewhere while it was held leaves it usable.
        self.shards[i]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The live value `key` names, if something holds one.
    pub fn find(&self, key: &K) -> Option<V> {
        self.shard(key).map.get(key).and_then(V::upgrade)
    }

    /// `made`, kept under `key`; or the live value `key` names, if
    /// another caller kept one meanwhile.
    pub fn keep(&self, key: K, made: V) -> V {
        self.keep_if(key, made, |_, _| true)
    }

    /// `made`, kept under `key`; or the live value `key` names, if
    /// another caller kept one meanwhile and `same(live, made)` says it is
    /// the same. For a cache keyed by a hash of the value (so that it does
    /// not hold a second copy of each as its key): a live value of a key
    /// that collides is replaced, and only loses its sharing.
    pub fn keep_if(&self, key: K, made: V, same: impl FnOnce(&V, &V) -> bool) -> V {
        let mut shard = self.shard(&key);
        if let Some(live) = shard.map.get(&key).and_then(V::upgrade)
            && same(&live, &made)
        {
            return live;
        }
        shard.map.insert(key, made.downgrade());
        if shard.map.len() > 2 * shard.swept_at + SWEEP_FLOOR {
            shard.map.retain(|_, w| V::is_live(w));
            shard.swept_at = shard.map.len();
        }
        made
    }

    /// How many entries the cache holds, live or not yet swept.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(PoisonError::into_inner).map.len())
            .sum()
    }
}

impl<K: Hash + Eq, V: Downgrade> Default for WeakCache<K, V> {
    fn default() -> Self {
        WeakCache::new()
    }
}

/// The live value of `cache` equal to `value`, or `value` kept, with the
/// cache keyed by the value's hash (see [`WeakCache::keep_if`]), so that
/// it holds no copy of a value as its key.
pub fn shared_by_hash<T: Hash + Eq + Clone>(cache: &WeakCache<u64, Arc<T>>, value: T) -> Arc<T> {
    share_by_hash(cache, Cow::Owned(value))
}

/// [`shared_by_hash`] for a value owned or borrowed: a borrowed one is
/// copied only when no live one is equal.
fn share_by_hash<T: Hash + Eq + Clone>(
    cache: &WeakCache<u64, Arc<T>>,
    value: Cow<'_, T>,
) -> Arc<T> {
    let hash = FxBuildHasher.hash_one(&*value);
    match cache.find(&hash) {
        Some(live) if *live == *value => live,
        _ => cache.keep_if(hash, Arc::new(value.into_owned()), |live, made| {
            live == made
        }),
    }
}

/// The shapes [`shared_shape`] and [`shared_shape_owned`] share.
static SHAPES: WeakCache<u64, Arc<shape::Shape>> = WeakCache::new();

/// One shared copy of `shape` (see [`WeakCache`]): what a value kept for a
/// long time holds, where many such values repeat a few shapes.
pub fn shared_shape(shape: &shape::Shape) -> Arc<shape::Shape> {
    share_by_hash(&SHAPES, Cow::Borrowed(shape))
}

/// [`shared_shape`] for a shape the caller no longer needs: kept without
/// a copy when no live one is equal. An entry layout's tuple of half a
/// million arrays is 104 MB.
pub fn shared_shape_owned(shape: shape::Shape) -> Arc<shape::Shape> {
    share_by_hash(&SHAPES, Cow::Owned(shape))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_shares_live_values_keeps_none_alive_and_stays_bounded() {
        let cache: WeakCache<u64, Arc<String>> = WeakCache::new();
        let held = cache.keep(1, Arc::new("one".to_string()));
        let found = cache.find(&1).expect("held");
        assert!(Arc::ptr_eq(&held, &found));
        // A caller's own copy gives way to the live one.
        let again = cache.keep(1, Arc::new("one".to_string()));
        assert!(Arc::ptr_eq(&again, &held));
        drop((held, found, again));
        assert!(cache.find(&1).is_none());
        // Entries whose values are gone are swept as the shards grow.
        for n in 0..100_000 {
            drop(cache.keep(n, Arc::new(n.to_string())));
        }
        let len = cache.len();
        assert!(
            len < SHARDS * 4 * SWEEP_FLOOR,
            "{len} entries kept for no live value"
        );
    }

    #[test]
    fn values_keyed_by_their_hash_share_only_when_equal() {
        let cache: WeakCache<u64, Arc<String>> = WeakCache::new();
        let a = shared_by_hash(&cache, "a".to_string());
        assert!(Arc::ptr_eq(&a, &shared_by_hash(&cache, "a".to_string())));
        // Two values under one key (a collision, forced): the later one is
        // kept, and neither is mistaken for the other.
        let b = cache.keep_if(FxBuildHasher.hash_one("a"), Arc::new("b".into()), |l, m| {
            l == m
        });
        assert_eq!(*b, "b");
        assert_eq!(*shared_by_hash(&cache, "a".to_string()), "a");
    }

    #[test]
    fn shared_shapes_are_one_copy_while_held() {
        let a = shape::Shape::Array(shape::ArrayShape::new(
            shape::PrimitiveType::F32,
            &[3, 1_000_003],
        ));
        let (x, y) = (shared_shape(&a), shared_shape(&a.clone()));
        assert!(Arc::ptr_eq(&x, &y));
        assert_eq!(*x, a);
    }
}
