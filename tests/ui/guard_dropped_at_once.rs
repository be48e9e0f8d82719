// A grad-mode guard that is not bound to a name is dropped at once, so the
// mode would not apply: the guard is #[must_use] (denied here as a project
// would), and the closure and macro forms cannot be dropped early at all.
#![deny(unused_must_use)]
use ferrotorch::autograd::no_grad_guard;

fn main() {
    no_grad_guard();
}
