//! Elementwise kernels against the CPU reference: random shapes (sizes 1, 2, 3, 31, 32, 33, 1025),
//! broadcast patterns, misaligned operands, fresh random data and poisoned outputs for every case.

use host::device::DeviceTensor;
use host::ops::elementwise;
use host::selftest::{Rng, binary_input_range, check_binary, check_unary};
use host::{HostError, HostTensor};
use kernels_gpu::abi::{BinaryOp, UnaryOp};
use proptest::prelude::*;

use crate::ctx;

const DIMS: [usize; 7] = [1, 2, 3, 31, 32, 33, 1025];
const MAX_ELEMS: usize = 1 << 18;

/// `out = a (op) b` on random data; `a` and `b` are `out` with some dimensions set to 1 or dropped.
#[derive(Clone, Debug)]
struct BinaryProblem {
    op: BinaryOp,
    a: Vec<usize>,
    b: Vec<usize>,
    offset: usize,
    seed: u64,
}

fn shape() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(prop::sample::select(&DIMS[..]), 0..=4)
        .prop_filter("bounded size", |s| s.iter().product::<usize>() <= MAX_ELEMS)
}

/// `out` with each dimension independently kept or broadcast (1), and a random number of leading
/// dimensions dropped.
fn broadcast_of(out: Vec<usize>) -> impl Strategy<Value = Vec<usize>> {
    let rank = out.len();
    (prop::collection::vec(any::<bool>(), rank), 0..=rank).prop_map(move |(keep, drop)| {
        out.iter().zip(&keep).skip(drop).map(|(&d, &k)| if k { d } else { 1 }).collect()
    })
}

impl Arbitrary for BinaryProblem {
    type Parameters = ();
    type Strategy = BoxedStrategy<Self>;

    fn arbitrary_with(_: ()) -> Self::Strategy {
        (
            prop::sample::select(&BinaryOp::ALL[..]),
            shape(),
            prop::sample::select(&[0usize, 1, 3][..]),
            any::<u64>(),
        )
            .prop_flat_map(|(op, out, offset, seed)| {
                (broadcast_of(out.clone()), broadcast_of(out), Just(op), Just(offset), Just(seed))
            })
            .prop_map(|(a, b, op, offset, seed)| BinaryProblem { op, a, b, offset, seed })
            .boxed()
    }
}

impl BinaryProblem {
    fn run(&self) -> Result<(), HostError> {
        let mut rng = Rng::new(self.seed);
        let [(alo, ahi), (blo, bhi)] = binary_input_range(self.op);
        let (a, b) = (rng.tensor(&self.a, alo, ahi), rng.tensor(&self.b, blo, bhi));
        check_binary(ctx(), self.op, &a, &b, self.offset)
    }
}

#[derive(Clone, Debug)]
struct UnaryProblem {
    op: UnaryOp,
    shape: Vec<usize>,
    offset: usize,
    seed: u64,
}

impl Arbitrary for UnaryProblem {
    type Parameters = ();
    type Strategy = BoxedStrategy<Self>;

    fn arbitrary_with(_: ()) -> Self::Strategy {
        let alpha = prop_oneof![Just(0.01f32), -2.0f32..2.0];
        (
            prop::sample::select(&UnaryOp::ALL[..]),
            alpha,
            shape(),
            prop::sample::select(&[0usize, 1, 2][..]),
            any::<u64>(),
        )
            .prop_map(|(op, alpha, shape, offset, seed)| {
                let op = if let UnaryOp::LeakyRelu { .. } = op { UnaryOp::LeakyRelu { alpha } } else { op };
                UnaryProblem { op, shape, offset, seed }
            })
            .boxed()
    }
}

impl UnaryProblem {
    fn run(&self) -> Result<(), HostError> {
        let x = Rng::new(self.seed).tensor(&self.shape, -12.0, 12.0);
        check_unary(ctx(), self.op, &x, self.offset)
    }
}

// 256 cases each by default; PROPTEST_CASES overrides (the sanitizer pass uses fewer).
proptest! {
    #[test]
    fn binary_ops_match_the_reference(p in any::<BinaryProblem>()) {
        p.run().map_err(|e| TestCaseError::fail(e.to_string()))?;
    }

    #[test]
    fn unary_ops_match_the_reference(p in any::<UnaryProblem>()) {
        p.run().map_err(|e| TestCaseError::fail(e.to_string()))?;
    }
}

/// Sizes large enough that the grid is capped and each thread runs the unrolled vector loop several
/// times, with a remainder that exercises every tail path.
#[test]
fn large_tensors_take_the_unrolled_path() {
    let n = (1 << 23) * 3 + 5;
    let mut rng = Rng::new(0x5eed);
    for op in [BinaryOp::Add, BinaryOp::Max] {
        let (a, b) = (rng.tensor(&[n], -8.0, 8.0), rng.tensor(&[n], -8.0, 8.0));
        check_binary(ctx(), op, &a, &b, 0).unwrap();
    }
    check_binary(
        ctx(),
        BinaryOp::Mul,
        &rng.tensor(&[6001, 1025], -8.0, 8.0),
        &rng.tensor(&[1025], -8.0, 8.0),
        0,
    )
    .unwrap();
    for op in [UnaryOp::Sigmoid, UnaryOp::GeluErf] {
        check_unary(ctx(), op, &rng.tensor(&[n], -8.0, 8.0), 0).unwrap();
    }
}

#[test]
fn special_values_follow_ieee_and_numpy() {
    let x = HostTensor::new(
        vec![8],
        vec![0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 1e-45, -1e-45, 88.8],
    )
    .unwrap();
    for op in UnaryOp::ALL {
        check_unary(ctx(), op, &x, 0).unwrap();
    }
    for op in BinaryOp::ALL {
        check_binary(ctx(), op, &x, &x, 0).unwrap();
        let y = HostTensor::new(vec![1], vec![f32::NAN]).unwrap();
        check_binary(ctx(), op, &x, &y, 0).unwrap();
    }
}

#[test]
fn shape_errors_name_the_op_and_shapes() {
    let ctx = ctx();
    let a = DeviceTensor::filled(ctx, &[2, 3], 1.0).unwrap();
    let b = DeviceTensor::filled(ctx, &[4], 1.0).unwrap();
    let mut y = DeviceTensor::filled(ctx, &[2, 3], 0.0).unwrap();
    let e = elementwise::binary(ctx, BinaryOp::Add, &a, &b, &mut y).unwrap_err();
    assert!(matches!(e, HostError::Broadcast { .. }), "{e}");
    assert!(e.to_string().contains("Add") && e.to_string().contains("[2, 3]"), "{e}");
    let mut wrong = DeviceTensor::filled(ctx, &[3, 2], 0.0).unwrap();
    let e = elementwise::binary(ctx, BinaryOp::Add, &a, &a, &mut wrong).unwrap_err();
    assert!(matches!(e, HostError::ShapeMismatch { .. }), "{e}");
    let e = elementwise::unary(ctx, UnaryOp::Exp, &a, &mut wrong).unwrap_err();
    assert!(e.to_string().contains("Exp output"), "{e}");
}

#[test]
fn empty_tensors_launch_nothing_and_succeed() {
    let ctx = ctx();
    let a = DeviceTensor::filled(ctx, &[0, 5], 1.0).unwrap();
    let mut y = DeviceTensor::filled(ctx, &[0, 5], 0.0).unwrap();
    elementwise::binary(ctx, BinaryOp::Add, &a, &a, &mut y).unwrap();
    elementwise::unary(ctx, UnaryOp::Relu, &a, &mut y).unwrap();
    ctx.synchronize().unwrap();
}
