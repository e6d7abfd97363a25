//! The consumer-group admin operations of librdkafka's AdminClient that
//! the `rdkafka` crate does not wrap (ListConsumerGroups with a state
//! filter, DescribeConsumerGroups, DeleteConsumerGroupOffsets), called
//! through `rdkafka::bindings` on the AdminClient's own handle.

use std::ffi::{c_char, CStr, CString};
use std::time::{Duration, Instant};

use rdkafka::admin::AdminClient;
use rdkafka::bindings as rd;
use rdkafka::client::DefaultClientContext;

pub type Admin = AdminClient<DefaultClientContext>;

/// A group as ListConsumerGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub group_id: String,
    pub state: rd::rd_kafka_consumer_group_state_t,
}

/// A group as DescribeConsumerGroups reports it.
#[derive(Debug, Clone)]
pub struct Described {
    pub group_id: String,
    pub error: rd::rd_kafka_resp_err_t,
    pub state: rd::rd_kafka_consumer_group_state_t,
    pub assignor: String,
    /// (client id, assigned (topic, partition)) per member.
    pub members: Vec<(String, Vec<(String, i32)>)>,
}

unsafe fn text(ptr: *const c_char) -> String {
    if ptr.is_null() {
        String::new()
    } else {
        CStr::from_ptr(ptr).to_string_lossy().into_owned()
    }
}

/// (topic, partition, error) of every element of a partition list.
unsafe fn partitions(
    list: *const rd::rd_kafka_topic_partition_list_t,
) -> Vec<(String, i32, rd::rd_kafka_resp_err_t)> {
    if list.is_null() {
        return Vec::new();
    }
    let list = &*list;
    (0..usize::try_from(list.cnt).unwrap_or(0))
        .map(|i| {
            let element = &*list.elems.add(i);
            (text(element.topic), element.partition, element.err)
        })
        .collect()
}

/// Runs one admin call on a fresh queue and waits for its result event.
/// The returned event must be destroyed by the caller.
unsafe fn call(
    admin: &Admin,
    op: rd::rd_kafka_admin_op_t,
    configure: impl FnOnce(*mut rd::rd_kafka_AdminOptions_t),
    start: impl FnOnce(
        *mut rd::rd_kafka_t,
        *const rd::rd_kafka_AdminOptions_t,
        *mut rd::rd_kafka_queue_t,
    ),
) -> *mut rd::rd_kafka_event_t {
    let rk = admin.inner().native_ptr();
    let queue = rd::rd_kafka_queue_new(rk);
    let options = rd::rd_kafka_AdminOptions_new(rk, op);
    configure(options);
    start(rk, options, queue);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut event: *mut rd::rd_kafka_event_t = std::ptr::null_mut();
    while event.is_null() && Instant::now() < deadline {
        event = rd::rd_kafka_queue_poll(queue, 100);
    }
    rd::rd_kafka_AdminOptions_destroy(options);
    rd::rd_kafka_queue_destroy(queue);
    assert!(!event.is_null(), "admin call {op:?} timed out");
    let error = rd::rd_kafka_event_error(event);
    assert_eq!(
        error,
        rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR,
        "admin call {op:?} failed: {}",
        text(rd::rd_kafka_event_error_string(event))
    );
    event
}

/// ListConsumerGroups, optionally only groups in `states`.
pub fn list_groups(admin: &Admin, states: &[rd::rd_kafka_consumer_group_state_t]) -> Vec<Listed> {
    unsafe {
        let event = call(
            admin,
            rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPS,
            |options| {
                if !states.is_empty() {
                    let error = rd::rd_kafka_AdminOptions_set_match_consumer_group_states(
                        options,
                        states.as_ptr(),
                        states.len(),
                    );
                    assert!(error.is_null(), "setting the state filter failed");
                }
            },
            |rk, options, queue| rd::rd_kafka_ListConsumerGroups(rk, options, queue),
        );
        let result = rd::rd_kafka_event_ListConsumerGroups_result(event);
        let mut count = 0usize;
        let listings = rd::rd_kafka_ListConsumerGroups_result_valid(result, &mut count);
        let mut listed: Vec<Listed> = (0..count)
            .map(|i| {
                let listing = *listings.add(i);
                Listed {
                    group_id: text(rd::rd_kafka_ConsumerGroupListing_group_id(listing)),
                    state: rd::rd_kafka_ConsumerGroupListing_state(listing),
                }
            })
            .collect();
        rd::rd_kafka_event_destroy(event);
        listed.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        listed
    }
}

/// DescribeConsumerGroups.
pub fn describe_groups(admin: &Admin, groups: &[&str]) -> Vec<Described> {
    let names: Vec<CString> = groups
        .iter()
        .map(|g| CString::new(*g).expect("no NUL"))
        .collect();
    let mut pointers: Vec<*const c_char> = names.iter().map(|n| n.as_ptr()).collect();
    unsafe {
        let event = call(
            admin,
            rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS,
            |_| {},
            |rk, options, queue| {
                rd::rd_kafka_DescribeConsumerGroups(
                    rk,
                    pointers.as_mut_ptr(),
                    pointers.len(),
                    options,
                    queue,
                )
            },
        );
        let result = rd::rd_kafka_event_DescribeConsumerGroups_result(event);
        let mut count = 0usize;
        let descriptions = rd::rd_kafka_DescribeConsumerGroups_result_groups(result, &mut count);
        let described = (0..count)
            .map(|i| {
                let group = *descriptions.add(i);
                let error = rd::rd_kafka_ConsumerGroupDescription_error(group);
                let members = (0..rd::rd_kafka_ConsumerGroupDescription_member_count(group))
                    .map(|m| {
                        let member = rd::rd_kafka_ConsumerGroupDescription_member(group, m);
                        let assignment = rd::rd_kafka_MemberDescription_assignment(member);
                        let assigned =
                            partitions(rd::rd_kafka_MemberAssignment_partitions(assignment))
                                .into_iter()
                                .map(|(t, p, _)| (t, p))
                                .collect();
                        (
                            text(rd::rd_kafka_MemberDescription_client_id(member)),
                            assigned,
                        )
                    })
                    .collect();
                Described {
                    group_id: text(rd::rd_kafka_ConsumerGroupDescription_group_id(group)),
                    error: if error.is_null() {
                        rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR
                    } else {
                        rd::rd_kafka_error_code(error)
                    },
                    state: rd::rd_kafka_ConsumerGroupDescription_state(group),
                    assignor: text(rd::rd_kafka_ConsumerGroupDescription_partition_assignor(
                        group,
                    )),
                    members,
                }
            })
            .collect();
        rd::rd_kafka_event_destroy(event);
        described
    }
}

/// DeleteConsumerGroupOffsets for `group`: the group-level error and the
/// error of each partition.
pub fn delete_offsets(
    admin: &Admin,
    group: &str,
    topic_partitions: &[(&str, i32)],
) -> (
    rd::rd_kafka_resp_err_t,
    Vec<(String, i32, rd::rd_kafka_resp_err_t)>,
) {
    let group = CString::new(group).expect("no NUL");
    let mut list = rdkafka::TopicPartitionList::new();
    for (topic, partition) in topic_partitions {
        list.add_partition(topic, *partition);
    }
    unsafe {
        let mut request = rd::rd_kafka_DeleteConsumerGroupOffsets_new(group.as_ptr(), list.ptr());
        let event = call(
            admin,
            rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DELETECONSUMERGROUPOFFSETS,
            |_| {},
            |rk, options, queue| {
                rd::rd_kafka_DeleteConsumerGroupOffsets(rk, &mut request, 1, options, queue)
            },
        );
        rd::rd_kafka_DeleteConsumerGroupOffsets_destroy(request);
        let result = rd::rd_kafka_event_DeleteConsumerGroupOffsets_result(event);
        let mut count = 0usize;
        let groups = rd::rd_kafka_DeleteConsumerGroupOffsets_result_groups(result, &mut count);
        assert_eq!(count, 1, "one result per group");
        let group = *groups;
        let error = rd::rd_kafka_group_result_error(group);
        let code = if error.is_null() {
            rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR
        } else {
            rd::rd_kafka_error_code(error)
        };
        let answer = (
            code,
            partitions(rd::rd_kafka_group_result_partitions(group)),
        );
        rd::rd_kafka_event_destroy(event);
        answer
    }
}
