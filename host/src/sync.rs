//! Poison-tolerant lock access, the one way the host takes its locks.
//!
//! A lock is poisoned when a thread panicked while holding it. The host's
//! shared state is updated in single steps (a value replaced, an entry
//! inserted), so a panic elsewhere never leaves it half-written; refusing
//! every later access would turn one bug into a dead broker. These helpers
//! take the guard either way.

use std::sync::{
    Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard, TryLockError,
};

/// Locks `mutex`, poisoned or not.
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Locks `mutex` where its holder may be waiting for the network (a
/// controller's answer): when it is taken, the wait happens in
/// `block_in_place`, so a runtime worker hands its other tasks on instead
/// of stalling them with it. Outside a runtime it is [`lock`].
pub fn lock_held_across_io<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.try_lock() {
        Ok(guard) => guard,
        Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        Err(TryLockError::WouldBlock) => tokio::task::block_in_place(|| lock(mutex)),
    }
}

/// Runs `future` to completion from synchronous code on the current
/// runtime, in `block_in_place` so a runtime worker hands its other tasks
/// on while it waits. `None` where that cannot be done (outside a runtime,
/// or on a current-thread runtime, whose one thread must not block).
pub fn block_on_current<F: std::future::Future>(future: F) -> Option<F::Output> {
    use tokio::runtime::{Handle, RuntimeFlavor};
    let runtime = Handle::try_current().ok()?;
    if runtime.runtime_flavor() != RuntimeFlavor::MultiThread {
        return None;
    }
    Some(tokio::task::block_in_place(|| runtime.block_on(future)))
}

/// Read-locks `lock`, poisoned or not.
pub fn read<T: ?Sized>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

/// Write-locks `lock`, poisoned or not.
pub fn write<T: ?Sized>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_still_hands_out_its_value() {
        let mutex = Mutex::new(1);
        let rw = RwLock::new(2);
        let _ = std::panic::catch_unwind(|| {
            let _m = mutex.lock();
            let _w = rw.write();
            panic!("poison both");
        });
        assert!(mutex.is_poisoned() && rw.is_poisoned());
        *lock(&mutex) += 1;
        *write(&rw) += 1;
        assert_eq!((*lock(&mutex), *read(&rw)), (2, 3));
    }
}
