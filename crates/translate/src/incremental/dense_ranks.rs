//! A work's age among one Gateway's works (`Gateways::new`'s signature):
//! the dense rank of its route's age rank among the Gateway's.

/// Dense ranks of a set of age ranks (each below the number of routes):
/// the position of each among the distinct ones, found by a table indexed
/// by age rank instead of sorting the set (a Gateway's works are
/// thousands; sorting and searching them was ~5% of a one-route edit).
#[derive(Default)]
pub(super) struct DenseRanks {
    /// Per age rank: its dense rank plus one, 0 if absent.
    table: Vec<u32>,
    /// The age ranks set in `table`, to clear it for the next set.
    set: Vec<usize>,
}

impl DenseRanks {
    pub(super) fn rank(&mut self, ages: impl Iterator<Item = usize>) {
        for &a in &self.set {
            self.table[a] = 0;
        }
        self.set.clear();
        for a in ages {
            if a >= self.table.len() {
                self.table.resize(a + 1, 0);
            }
            if self.table[a] == 0 {
                self.table[a] = 1;
                self.set.push(a);
            }
        }
        // Numbered in age order; the set is sorted only when its ranks
        // are not dense in the table's range (then the table walk would
        // cost more than the sort).
        if self.set.len() * 8 < self.table.len() {
            self.set.sort_unstable();
            for (i, &a) in self.set.iter().enumerate() {
                self.table[a] = u32::try_from(i + 1).unwrap_or(u32::MAX);
            }
        } else {
            let mut next = 0u32;
            for t in &mut self.table {
                if *t != 0 {
                    next += 1;
                    *t = next;
                }
            }
        }
    }

    /// `age`'s dense rank; `usize::MAX` when not in the set.
    pub(super) fn of(&self, age: usize) -> usize {
        match self.table.get(age) {
            Some(&r) if r != 0 => (r - 1) as usize,
            _ => usize::MAX,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::DenseRanks;

    /// The ranks a sort of the distinct ages gives, for sets dense and
    /// sparse in the table's range (both ways of numbering), reusing one
    /// table across sets as `Gateways::new` does.
    #[test]
    fn ranks_are_the_sorted_positions_among_distinct_ages() {
        let mut dense = DenseRanks::default();
        let mut seed = 7u64;
        for (len, range) in [
            (50, 60),
            (5, 10_000),
            (1_000, 1_200),
            (0, 10),
            (3, 3),
            (200, 100_000),
        ] {
            let ages: Vec<usize> = (0..len)
                .map(|_| {
                    seed = seed
                        .wrapping_mul(6_364_136_223_846_793_005)
                        .wrapping_add(1_442_695_040_888_963_407);
                    (seed >> 33) as usize % range
                })
                .collect();
            dense.rank(ages.iter().copied());
            let mut sorted = ages.clone();
            sorted.sort_unstable();
            sorted.dedup();
            for &a in &ages {
                assert_eq!(
                    Some(dense.of(a)),
                    sorted.binary_search(&a).ok(),
                    "age {a} of {len} in {range}"
                );
            }
            for absent in (0..range).filter(|a| sorted.binary_search(a).is_err()).take(20) {
                assert_eq!(dense.of(absent), usize::MAX, "absent {absent}");
            }
        }
        assert_eq!(dense.of(usize::MAX), usize::MAX);
    }
}
