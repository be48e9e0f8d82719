//! DeviceMesh on real processes: 1-D, 2-D (named) and 3-D meshes over 4
//! ranks, their groups checked by all-reduces along each dimension,
//! sub-meshes, a mesh over some of the ranks, and the errors. Each parent
//! test starts this test binary once per rank (the ignored `child` test).

use std::time::Duration;

mod common;
use common::{join_as_child, launch};
use ferrotorch_core::Tensor;
use ferrotorch_distributed::device_mesh::{DeviceMesh, MeshDim, init_device_mesh};
use ferrotorch_distributed::{self as dist, ReduceOp};

#[test]
#[ignore = "the entry point of the child processes that the other tests start"]
fn child() {
    let case = join_as_child();
    let r = dist::get_rank().unwrap();
    match case.as_str() {
        "meshes" => meshes(r),
        other => panic!("unknown case {other}"),
    }
    dist::destroy_process_group();
    println!("CHILD OK");
}

/// The sum over `group` of every member's global rank plus one.
fn sum_of_ranks(group: &dist::ProcessGroup, r: usize) -> i64 {
    let x = Tensor::new([r as i64 + 1]).unwrap();
    group.all_reduce(&x, ReduceOp::Sum).unwrap().wait().unwrap();
    x.item::<i64>().unwrap()
}

fn meshes(r: usize) {
    // 2 x 2, named: rank = 2 * dp + tp.
    let mesh = init_device_mesh("cpu", &[2, 2], Some(&["dp", "tp"])).unwrap();
    assert_eq!(
        (mesh.ndim(), mesh.shape(), mesh.size(None).unwrap()),
        (2, &[2usize, 2][..], 4)
    );
    assert_eq!(mesh.get_coordinate().unwrap(), [r / 2, r % 2]);
    assert_eq!(mesh.mesh().unwrap().to_vec::<i64>().unwrap(), [0, 1, 2, 3]);
    let tp = mesh.get_group("tp").unwrap();
    let dp = mesh.get_group(MeshDim::Name("dp")).unwrap();
    assert_eq!(tp.members(), [r / 2 * 2, r / 2 * 2 + 1], "a row");
    assert_eq!(dp.members(), [r % 2, r % 2 + 2], "a column");
    assert_eq!(mesh.get_group(1).unwrap().members(), tp.members());
    assert_eq!(sum_of_ranks(&tp, r), (r / 2 * 2 + 1 + r / 2 * 2 + 2) as i64);
    assert_eq!(sum_of_ranks(&dp, r), (r % 2 + 1 + r % 2 + 3) as i64);
    assert_eq!(mesh.get_local_rank("tp").unwrap(), r % 2);
    assert_eq!(mesh.get_local_rank(0).unwrap(), r / 2);
    assert_eq!(mesh.size("dp").unwrap(), 2);
    // Errors: the dimension must be named on a 2-D mesh, and exist.
    let e = mesh.get_group(None).unwrap_err().to_string();
    assert!(e.contains("2 dimensions"), "{e}");
    let e = mesh.get_group("pp").unwrap_err().to_string();
    assert!(e.contains("\"pp\"") && e.contains("dp"), "{e}");
    assert!(mesh.get_group(2).is_err());
    // Sub-meshes reuse the groups, in the order asked.
    let dp_mesh = mesh.submesh(&["dp"]).unwrap();
    assert_eq!(dp_mesh.ranks(), dp.members());
    assert_eq!(dp_mesh.get_group(None).unwrap().members(), dp.members());
    assert_eq!(dp_mesh.get_local_rank(None).unwrap(), r / 2);
    let swapped = mesh.submesh(&["tp", "dp"]).unwrap();
    assert_eq!(swapped.ranks(), [0, 2, 1, 3]);
    assert_eq!(swapped.get_coordinate().unwrap(), [r % 2, r / 2]);
    assert!(mesh.submesh(&["dp", "dp"]).is_err());

    // 1-D over the world: its group holds everyone.
    let flat = init_device_mesh("cpu", &[4], None).unwrap();
    assert_eq!(sum_of_ranks(&flat.get_group(None).unwrap(), r), 10);
    assert_eq!(flat.get_local_rank(None).unwrap(), r);

    // 3-D, 2 x 1 x 2: the middle dimension's groups are single ranks.
    let cube = init_device_mesh("cpu", &[2, 1, 2], Some(&["a", "b", "c"])).unwrap();
    assert_eq!(cube.get_group("b").unwrap().members(), [r]);
    assert_eq!(sum_of_ranks(&cube.get_group("c").unwrap(), r), sum_of_ranks(&tp, r));
    assert_eq!(sum_of_ranks(&cube.get_group("a").unwrap(), r), sum_of_ranks(&dp, r));

    // A mesh over ranks 3 and 1 only: every rank takes part in making it;
    // ranks 0 and 2 are outside.
    let part = DeviceMesh::new("cpu", vec![3, 1], &[2], None).unwrap();
    if r % 2 == 1 {
        assert_eq!(part.get_local_rank(None).unwrap(), if r == 3 { 0 } else { 1 });
        assert_eq!(sum_of_ranks(&part.get_group(None).unwrap(), r), 6);
    } else {
        assert!(part.get_coordinate().is_none());
        let e = part.get_group(None).unwrap_err().to_string();
        assert!(e.contains("not in the mesh"), "{e}");
    }

    // Bad meshes are refused on every rank, before any group is made.
    let e = init_device_mesh("cpu", &[3, 2], None).unwrap_err().to_string();
    assert!(e.contains("[3, 2]") && e.contains("world size is 4"), "{e}");
    assert!(init_device_mesh("cpu", &[2, 2], Some(&["x"])).is_err());
    assert!(init_device_mesh("cpu", &[2, 2], Some(&["x", "x"])).is_err());
    assert!(init_device_mesh("cuda", &[4], None).is_err());
    assert!(DeviceMesh::new("cpu", vec![0, 0], &[2], None).is_err());
    assert!(DeviceMesh::new("cpu", vec![0, 9], &[2], None).is_err());

    // The groups still work after all that.
    assert_eq!(sum_of_ranks(&tp, r), (r / 2 * 4 + 3) as i64);
}

#[test]
fn meshes_of_one_two_and_three_dimensions_on_4_ranks() {
    launch("meshes", 4, Duration::from_secs(120));
}
