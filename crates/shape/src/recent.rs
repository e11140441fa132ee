//! A thread's last few values of one kind: the bounded, lock-free caches
//! that share equal layouts (`SharedLayout::recent`) and remember bitcast
//! verdicts (`bitcast::decide`).

/// The last `N` values a thread kept, replaced oldest first. The one that
/// answered last is tried first: lookups come in runs (a row of
/// elementwise ops writes one layout; a module asks one bitcast question
/// in computation after computation).
pub(crate) struct Recent<T, const N: usize> {
    slots: [Option<T>; N],
    /// The slot the next new value takes.
    next: usize,
    /// The slot that answered last.
    last: usize,
}

impl<T, const N: usize> Recent<T, N> {
    /// Nothing kept yet.
    pub(crate) const fn new() -> Self {
        Recent {
            slots: [const { None }; N],
            next: 0,
            last: 0,
        }
    }

    /// A kept value that `same` accepts.
    pub(crate) fn find(&mut self, same: impl Fn(&T) -> bool) -> Option<&T> {
        let i = std::iter::once(self.last).chain(0..N).find(|&i| {
            self.slots
                .get(i)
                .and_then(Option::as_ref)
                .is_some_and(&same)
        })?;
        self.last = i;
        self.slots.get(i)?.as_ref()
    }

    /// Keeps `value` in place of the oldest.
    pub(crate) fn add(&mut self, value: T) {
        if let Some(slot) = self.slots.get_mut(self.next) {
            *slot = Some(value);
        }
        self.last = self.next;
        self.next = (self.next + 1) % N.max(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_goes_first_and_the_last_answer_is_tried_first() {
        let mut recent: Recent<u32, 3> = Recent::new();
        assert_eq!(recent.find(|_| true), None);
        for v in [1, 2, 3] {
            recent.add(v);
        }
        assert_eq!(recent.find(|&v| v == 1), Some(&1));
        // The first slot answered last, so a lookup any value accepts
        // gets it.
        assert_eq!(recent.find(|_| true), Some(&1));
        recent.add(4);
        assert_eq!(recent.find(|&v| v == 1), None, "the oldest went");
        assert_eq!(recent.find(|&v| v == 2), Some(&2));
        assert_eq!(recent.find(|&v| v == 4), Some(&4));
    }
}
