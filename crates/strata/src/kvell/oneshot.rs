//! A one-value reply channel on a mutex and a condition variable. The
//! caller's thread may be a C program's: blocking on it must not create
//! per-thread state that outlives the call (a crossbeam receive registers
//! the thread's handle in a thread-local that a C main thread never frees).

use parking_lot::{Condvar, Mutex};
use std::sync::Arc;

enum State<T> {
    Waiting,
    Sent(T),
    Dropped,
}

struct Slot<T> {
    state: Mutex<State<T>>,
    cv: Condvar,
}

/// The sending half; dropping it unsent wakes the receiver with `None`.
pub struct Tx<T> {
    slot: Arc<Slot<T>>,
}

/// The receiving half.
pub struct Rx<T> {
    slot: Arc<Slot<T>>,
}

pub fn channel<T>() -> (Tx<T>, Rx<T>) {
    let slot = Arc::new(Slot {
        state: Mutex::new(State::Waiting),
        cv: Condvar::new(),
    });
    (Tx { slot: slot.clone() }, Rx { slot })
}

impl<T> Tx<T> {
    pub fn send(self, v: T) {
        *self.slot.state.lock() = State::Sent(v);
        self.slot.cv.notify_one();
    }
}

impl<T> Drop for Tx<T> {
    fn drop(&mut self) {
        let mut s = self.slot.state.lock();
        if matches!(*s, State::Waiting) {
            *s = State::Dropped;
            self.slot.cv.notify_one();
        }
    }
}

impl<T> Rx<T> {
    /// The value, or `None` if the sender was dropped without sending.
    pub fn recv(self) -> Option<T> {
        let mut s = self.slot.state.lock();
        loop {
            match std::mem::replace(&mut *s, State::Dropped) {
                State::Waiting => {
                    *s = State::Waiting;
                    self.slot.cv.wait(&mut s);
                }
                State::Sent(v) => return Some(v),
                State::Dropped => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_across_threads_and_notices_a_drop() {
        let (tx, rx) = channel();
        let t = std::thread::spawn(move || tx.send(7));
        assert_eq!(rx.recv(), Some(7));
        t.join().expect("join");
        let (tx, rx) = channel::<u8>();
        let t = std::thread::spawn(move || drop(tx));
        assert_eq!(rx.recv(), None);
        t.join().expect("join");
    }
}
