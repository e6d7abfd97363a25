//! The open-file limit. Every connection and every open segment file is a
//! descriptor, and the default soft limit of many systems (1024) is far
//! below what a broker with thousands of consumers needs, while the hard
//! limit is usually much higher. As Kafka's packaging does, the broker
//! raises its soft limit to the hard one at start, and says so.

use tracing::{info, warn};

/// Raises the soft `RLIMIT_NOFILE` to the hard limit.
pub fn raise_to_hard_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        warn!(
            "cannot read the open-file limit: {}",
            std::io::Error::last_os_error()
        );
        return;
    }
    if limit.rlim_cur >= limit.rlim_max {
        info!(
            limit = limit.rlim_cur,
            "the open-file soft limit is already the hard limit"
        );
        return;
    }
    let soft = limit.rlim_cur;
    limit.rlim_cur = limit.rlim_max;
    // SAFETY: setrlimit reads the struct we own.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } == 0 {
        info!(
            from = soft,
            to = limit.rlim_max,
            "raised the open-file soft limit to the hard limit"
        );
    } else {
        warn!(
            "cannot raise the open-file limit: {}",
            std::io::Error::last_os_error()
        );
    }
}
