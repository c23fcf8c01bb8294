//! The arena and the persistent state buffers on the device: allocation counting, growth only when
//! needed, shrinking, bounds-checked slots, external buffers, state reset.

use host::arena::{Arena, StateBuffers, required_bytes};
use planner::memory::BufferSlot;
use planner::{Binding, DType, Dim, Graph};

use crate::ctx;

#[test]
fn the_arena_allocates_once_and_only_grows_when_a_binding_needs_more() {
    let ctx = ctx();
    let mut a = Arena::new(ctx, 0).unwrap();
    assert_eq!((a.bytes(), a.allocation_count(), a.base_ptr(ctx)), (0, 0, 0));
    assert!(a.ensure(ctx, 1 << 20).unwrap());
    assert_eq!(a.allocation_count(), 1);
    assert_eq!(a.base_ptr(ctx) % 256, 0);
    for _ in 0..100 {
        assert!(!a.ensure(ctx, 1 << 19).unwrap(), "a smaller binding must not allocate");
    }
    assert_eq!(a.allocation_count(), 1);
    a.shrink_to(ctx, 1 << 16).unwrap();
    assert_eq!((a.bytes(), a.allocation_count()), (1 << 16, 2));
    let inside = BufferSlot { offset: 1 << 15, bytes: 1 << 15 };
    assert_eq!(a.slot_ptr(ctx, inside).unwrap(), a.base_ptr(ctx) + (1 << 15));
    assert!(a.slot_ptr(ctx, BufferSlot { offset: 1 << 15, bytes: (1 << 15) + 1 }).is_err());
    a.shrink_to(ctx, 0).unwrap();
    assert_eq!(a.bytes(), 0);
}

#[test]
fn an_external_arena_never_allocates_and_reports_when_too_small() {
    let ctx = ctx();
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::Symbol("n".into())]);
    let a = g.relu(x);
    let b = g.sigmoid(a);
    let c = g.add(a, b);
    g.output(c);
    let need = required_bytes(&g, &Binding::new().with("n", 10_000)).unwrap();
    assert_eq!(need, 2 * 40_192, "a and b live together, 40000 bytes each rounded up to 256");
    let backing = Arena::new(ctx, need).unwrap();
    // SAFETY: `backing` is a live allocation of `need` bytes in this context that outlives `ext`
    // and that nothing else uses.
    let mut ext = unsafe { Arena::external(backing.base_ptr(ctx), need) };
    assert!(!ext.ensure(ctx, need).unwrap());
    let e = ext.ensure(ctx, need + 1).unwrap_err();
    assert!(e.to_string().contains("caller-provided"), "{e}");
    assert_eq!(ext.allocation_count(), 0);
}

#[test]
fn state_persists_until_reset() {
    let ctx = ctx();
    let mut s = StateBuffers::new(ctx, &[("ssm".into(), 1000), ("conv".into(), 24)]).unwrap();
    assert!(s.to_host(ctx).unwrap().iter().all(|&b| b == 0), "state starts zeroed");
    s.load(ctx, "conv", &[7u8; 24]).unwrap();
    let host = s.to_host(ctx).unwrap();
    assert_eq!(&host[1024..1048], &[7u8; 24], "conv state sits after ssm, 256-aligned");
    assert!(host[..1024].iter().all(|&b| b == 0));
    assert!(s.load(ctx, "conv", &[1u8; 23]).is_err());
    assert!(s.load(ctx, "missing", &[]).is_err());
    s.reset_state(ctx).unwrap();
    assert!(s.to_host(ctx).unwrap().iter().all(|&b| b == 0));
    assert!(s.ptr(ctx, "ssm").is_some() && s.ptr(ctx, "nope").is_none());
}

#[test]
fn a_session_runs_in_a_caller_provided_arena() {
    use host::selftest::Rng;
    use host::{Session, SessionOptions};
    let ctx = ctx();
    let mut rng = Rng::new(0xa4e);
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::Symbol("n".into()), Dim::Known(64)]);
    let mut weight = |g: &mut Graph, name: &str| {
        let w = rng.tensor(&[64, 64], -0.2, 0.2).to_const();
        g.initializer(name, w)
    };
    let (w1, w2) = (weight(&mut g, "w1"), weight(&mut g, "w2"));
    let h = g.matmul(x, w1);
    let r = g.relu(h);
    let y = g.matmul(r, w2);
    g.output(y);
    let need = Session::new(ctx, g.clone(), SessionOptions::default())
        .unwrap()
        .required_arena_bytes(&Binding::new().with("n", 300))
        .unwrap();
    assert!(need >= 300 * 64 * 4, "the hidden layer lives in the arena: {need}");
    let backing = Arena::new(ctx, need).unwrap();
    // SAFETY: `backing` is a live allocation of `need` bytes in this context that outlives the
    // session and that nothing else uses.
    let mut s = unsafe {
        Session::with_external_arena(ctx, g.clone(), SessionOptions::default(), backing.base_ptr(ctx), need)
    }
    .unwrap();
    let inputs = vec![("x".to_string(), rng.tensor(&[300, 64], -1.0, 1.0))];
    let want = host::reference::eval(&g, &inputs).unwrap();
    let got = s.run(&inputs).unwrap();
    for (a, b) in got[0].1.data().to_f64s().iter().zip(want[0].1.data().to_f64s()) {
        assert!((a - b).abs() <= 1e-4 * (b.abs() + 1.0), "gpu {a}, reference {b}");
    }
    // A binding that needs more than the caller's buffer is a clear error, not a new allocation.
    let big = vec![("x".to_string(), rng.tensor(&[600, 64], -1.0, 1.0))];
    let e = s.run(&big).unwrap_err().to_string();
    assert!(e.contains("caller-provided"), "{e}");
}
