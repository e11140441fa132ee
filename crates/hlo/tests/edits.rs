//! Operand edits: a batch of edits leaves the same graph as the same edits
//! one at a time, and its work (edges unlinked) stays linear in the number
//! of uses involved, for a value with many users and for a user with many
//! operands. One edit at a time would walk petgraph's linked lists from
//! their heads, once per edit: quadratic on both shapes.

use hlo::{Computation, InstId, Instruction, Opcode};
use shape::Shape;

fn scalar() -> Shape {
    shape::parse_shape("f32[]").expect("f32[]")
}

/// `p`, `q`, `n` users `u_k = add(p, p)` and a root tuple of every user.
fn shared_and_wide(n: usize) -> (Computation, InstId, InstId, Vec<InstId>, InstId) {
    let mut c = Computation::new("c");
    let param = |name: &str, k: u32| {
        let mut i = Instruction::new(name, Opcode::Parameter, scalar());
        i.payload = hlo::Payload::Parameter(k);
        i
    };
    let p = c.add(param("p", 0), &[]).unwrap();
    let q = c.add(param("q", 1), &[]).unwrap();
    let users: Vec<InstId> = (0..n)
        .map(|k| {
            c.add(
                Instruction::new(format!("u{k}"), Opcode::Add, scalar()),
                &[p, p],
            )
            .unwrap()
        })
        .collect();
    let tuple_shape = Shape::Tuple(vec![scalar(); n]);
    let root = c
        .add(Instruction::new("t", Opcode::Tuple, tuple_shape), &users)
        .unwrap();
    c.set_root(root).unwrap();
    (c, p, q, users, root)
}

/// One instruction's operands and its uses (user, operand index).
type Relations = (Vec<InstId>, Vec<(InstId, u32)>);

/// Every instruction's operands and uses, as the graph says.
fn relations(c: &Computation) -> Vec<Relations> {
    c.instructions()
        .map(|(id, _)| (c.operands(id).to_vec(), c.uses(id).to_vec()))
        .collect()
}

#[test]
fn a_batch_edits_as_single_edits_do() {
    let (base, p, q, users, root) = shared_and_wide(40);
    // Every third use of p's first slot, every second of its second, some
    // tuple elements, one slot edited twice and one edited back.
    let mut edits = Vec::new();
    for (k, &u) in users.iter().enumerate() {
        if k % 3 == 0 {
            edits.push((u, 0, q));
        }
        if k % 2 == 0 {
            edits.push((u, 1, q));
        }
        if k % 5 == 0 {
            edits.push((root, k, p));
        }
    }
    edits.push((users[1], 0, q));
    edits.push((users[1], 0, p));
    edits.push((users[4], 1, p));
    let mut one_by_one = base.clone();
    for &(user, index, new) in &edits {
        one_by_one.set_operand(user, index, new).unwrap();
    }
    let mut batch = base.clone();
    batch.set_operands_at(&edits).unwrap();
    assert_eq!(relations(&batch), relations(&one_by_one));
    assert_ne!(relations(&batch), relations(&base));
    assert_eq!(batch.graph().edge_count(), base.graph().edge_count());
    // An invalid edit changes nothing.
    let mut refused = base.clone();
    assert!(
        refused
            .set_operands_at(&[(users[0], 0, q), (users[0], 2, q)])
            .is_err()
    );
    assert_eq!(relations(&refused), relations(&base));
}

/// Twelve parameters and 60 users of four operands each, every operand one
/// of the parameters, chosen by a fixed pseudo-random sequence.
fn crowded() -> (Computation, Vec<InstId>, Vec<InstId>) {
    let mut c = Computation::new("c");
    let params: Vec<InstId> = (0..12)
        .map(|k| {
            let mut i = Instruction::new(format!("p{k}"), Opcode::Parameter, scalar());
            i.payload = hlo::Payload::Parameter(k);
            c.add(i, &[]).unwrap()
        })
        .collect();
    let mut next = lcg(7);
    let users: Vec<InstId> = (0..60)
        .map(|k| {
            let operands: Vec<InstId> = (0..4).map(|_| params[next() % params.len()]).collect();
            c.add(
                Instruction::new(format!("u{k}"), Opcode::Tuple, scalar()),
                &operands,
            )
            .unwrap()
        })
        .collect();
    (c, params, users)
}

/// A fixed pseudo-random sequence of numbers below 2^31.
fn lcg(seed: u64) -> impl FnMut() -> usize {
    let mut state = seed;
    move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as usize
    }
}

#[test]
fn random_batches_edit_as_single_edits_do() {
    // Batches of every size up to a few hundred edits: slots edited twice,
    // edited back, set to what they hold, users that lose more edges than
    // their old operands and the other way round, so that both lists and
    // ties are unlinked from.
    let (base, params, users) = crowded();
    let mut next = lcg(11);
    for round in 0..200 {
        let size = 1 + round * 3 / 2;
        let edits: Vec<(InstId, usize, InstId)> = (0..size)
            .map(|_| {
                // Few users per batch in some rounds, many in others.
                let spread = 1 + round % users.len();
                let user = users[next() % spread];
                (user, next() % 4, params[next() % params.len()])
            })
            .collect();
        let mut one_by_one = base.clone();
        for &(user, index, new) in &edits {
            one_by_one.set_operand(user, index, new).unwrap();
        }
        let mut batch = base.clone();
        batch.set_operands_at(&edits).unwrap();
        assert_eq!(relations(&batch), relations(&one_by_one), "round {round}");
        assert_eq!(batch.graph().edge_count(), base.graph().edge_count());
    }
}

#[test]
fn redirecting_many_uses_of_one_value_is_linear() {
    for n in [1_000, 10_000] {
        let (mut c, p, q, users, _) = shared_and_wide(n);
        // Every user's first operand: p keeps the second ones, which lie
        // between the lost edges in its list.
        let edits: Vec<(InstId, usize, InstId)> = users.iter().map(|&u| (u, 0, q)).collect();
        let work = c.set_operands_at(&edits).unwrap();
        assert!(work <= 2 * n, "{work} edges unlinked to redirect {n} uses");
        assert_eq!(c.uses(p).len(), n);
        assert_eq!(c.uses(q).len(), n);
    }
}

#[test]
fn replacing_many_operands_of_one_user_is_linear() {
    for n in [1_000, 10_000] {
        let (mut c, p, _, users, root) = shared_and_wide(n);
        let edits: Vec<(InstId, usize, InstId)> = (0..n).map(|k| (root, k, p)).collect();
        let work = c.set_operands_at(&edits).unwrap();
        assert!(work <= n, "{work} edges unlinked to replace {n} operands");
        assert!(users.iter().all(|&u| c.users(u).is_empty()));
        assert_eq!(c.uses(p).len(), 3 * n);
    }
}

#[test]
fn replacing_all_uses_is_linear() {
    let n = 10_000;
    let (mut c, p, q, users, _) = shared_and_wide(n);
    // Each user loses two edges and p loses 2n: p's list is taken.
    let edits: Vec<(InstId, usize, InstId)> =
        users.iter().flat_map(|&u| [(u, 0, q), (u, 1, q)]).collect();
    let work = c.set_operands_at(&edits).unwrap();
    assert!(
        work <= 2 * n,
        "{work} edges unlinked to redirect {} uses",
        2 * n
    );
    c.replace_all_uses(q, p).unwrap();
    assert!(c.uses(q).is_empty());
    assert_eq!(c.uses(p).len(), 2 * n);
}

/// `n` parameters `p_k`, each read by `m_k = negate(p_k)`, by a copy `c_k`
/// and by a root tuple of every `p_k` and `m_k`: the copied result of
/// `test_support::scaling`'s `copied_result` shape.
fn read_by_a_wide_tuple(n: usize) -> (Computation, Vec<(InstId, usize, InstId)>) {
    let mut c = Computation::new("c");
    let mut elements = Vec::new();
    let mut copies = Vec::new();
    for k in 0..n {
        let mut param = Instruction::new(format!("p{k}"), Opcode::Parameter, scalar());
        param.payload = hlo::Payload::Parameter(k as u32);
        let p = c.add(param, &[]).unwrap();
        let m = c
            .add(
                Instruction::new(format!("m{k}"), Opcode::Negate, scalar()),
                &[p],
            )
            .unwrap();
        elements.extend([p, m]);
        copies.push((m, p));
    }
    let tuple_shape = Shape::Tuple(vec![scalar(); 2 * n]);
    let root = c
        .add(Instruction::new("t", Opcode::Tuple, tuple_shape), &elements)
        .unwrap();
    c.set_root(root).unwrap();
    let edits = copies
        .into_iter()
        .enumerate()
        .map(|(k, (m, p))| {
            let copy = c
                .add(
                    Instruction::new(format!("c{k}"), Opcode::Copy, scalar()),
                    &[p],
                )
                .unwrap();
            (m, 0, copy)
        })
        .collect();
    (c, edits)
}

/// Each negation and its parameter lose one edge each: a tie. Unlinked
/// from the parameter's list of uses, each lost edge came after its
/// copy's edge and its edge into the tuple, and unlinking that one walks
/// the tuple's list of operands in petgraph: quadratic, unseen by the
/// count of edges unlinked. From the negation's list of operands it is
/// the only edge unlinked.
#[test]
fn a_tie_is_unlinked_from_the_users_list() {
    let n = 1_000;
    let (base, edits) = read_by_a_wide_tuple(n);
    let mut batch = base.clone();
    let work = batch.set_operands_at(&edits).unwrap();
    assert_eq!(work, n, "{work} edges unlinked to redirect {n} uses");
    let mut one_by_one = base.clone();
    for &(user, index, new) in &edits {
        one_by_one.set_operand(user, index, new).unwrap();
    }
    assert_eq!(relations(&batch), relations(&one_by_one));
}
