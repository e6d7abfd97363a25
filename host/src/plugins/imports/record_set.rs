//! `log.record-set`: record batches the host holds for a guest, referenced
//! instead of copied into it (DESIGN §12). A fetch hands each partition's
//! bytes to the guest as a handle; the guest puts the handle in its
//! response (`answer.respond-referencing`) and the connection writes the
//! bytes from this buffer. A module that looks inside reads them. A
//! Produce handler gets its request's records the same way
//! (`log.request-records`, `plugins::produce_records`) and appends them
//! by handle.

use bytes::Bytes;
use wasmtime::component::Resource;
use wasmtime_wasi::WasiView;

use crate::log::file_records::Records;
use crate::plugins::bindings::handler::exports::gregor::broker::handler::{
    Answer, ReferencingBody,
};
use crate::plugins::bindings::handler::gregor::broker::log::HostRecordSet;
use crate::plugins::bindings::Outcome;
use crate::plugins::state::HandlerState;

/// The host side of a `record-set` handle.
#[derive(Debug)]
pub struct RecordSet {
    records: Records,
}

impl HostRecordSet for HandlerState {
    fn size(&mut self, set: Resource<RecordSet>) -> wasmtime::Result<u32> {
        let set = self.table().get(&set)?;
        // A fetch never reads past `max-bytes` (an s32).
        Ok(u32::try_from(set.records.len()).unwrap_or(u32::MAX))
    }

    fn read(
        &mut self,
        set: Resource<RecordSet>,
        offset: u32,
        len: u32,
    ) -> wasmtime::Result<Vec<u8>> {
        let records = &self.table().get(&set)?.records;
        Ok(records.read(offset as usize, len as usize)?)
    }

    fn drop(&mut self, set: Resource<RecordSet>) -> wasmtime::Result<()> {
        self.table().delete(set)?;
        Ok(())
    }
}

impl HandlerState {
    /// The Store's resource table (WASI's, which holds the record sets too).
    fn table(&mut self) -> &mut wasmtime::component::ResourceTable {
        self.ctx().table
    }

    /// Hands records the host holds (a fetch's, where they are, or a
    /// Produce request's buffer) to the guest as a record set.
    pub fn record_set(&mut self, records: Records) -> wasmtime::Result<Resource<RecordSet>> {
        Ok(self.table().push(RecordSet { records })?)
    }

    /// The bytes of a record set the guest holds (a shared buffer when
    /// they are in memory, read when they are in a segment file); a
    /// handle the table does not hold traps.
    pub fn record_set_bytes(&mut self, set: &Resource<RecordSet>) -> wasmtime::Result<Bytes> {
        Ok(self.table().get(set)?.records.load()?)
    }

    /// What the guest answered, its referenced record sets taken back
    /// from the guest's handles.
    pub fn take_answer(&mut self, answer: Answer) -> wasmtime::Result<Answered> {
        let referencing = match answer {
            Answer::Outcome(Outcome::Respond(body)) => {
                return Ok(Answered::Respond(ResponseBody::plain(body)))
            }
            Answer::Outcome(Outcome::NoResponse) => return Ok(Answered::NoResponse),
            Answer::Outcome(Outcome::CloseConnection) => return Ok(Answered::CloseConnection),
            Answer::RespondReferencing(referencing) => referencing,
        };
        let ReferencingBody { body, splices } = referencing;
        let mut records = Vec::with_capacity(splices.len());
        for splice in splices {
            let set = self.table().delete(splice.records)?;
            records.push((splice.at as usize, set.records));
        }
        let body = ResponseBody::referencing(body, records)
            .map_err(|reason| wasmtime::Error::msg(format!("bad response: {reason}")))?;
        Ok(Answered::Respond(body))
    }
}

/// A handler's answer, on the host's side.
#[derive(Debug)]
pub enum Answered {
    /// Send this response body (the host writes the response header).
    Respond(ResponseBody),
    /// Send nothing (acks=0 Produce).
    NoResponse,
    /// Close the connection.
    CloseConnection,
}

/// A response body: the guest's bytes with record sets inserted at
/// their places, written without concatenating them.
#[derive(Debug, Clone)]
pub struct ResponseBody {
    /// The guest's bytes.
    body: Bytes,
    /// Where in `body` each record set goes, ascending.
    records: Vec<(usize, Records)>,
}

impl ResponseBody {
    /// A body without referenced records.
    pub fn plain(body: Vec<u8>) -> Self {
        Self {
            body: Bytes::from(body),
            records: Vec::new(),
        }
    }

    /// `body` with `records` inserted at their places, which must be in
    /// ascending order within the body.
    pub fn referencing(body: Vec<u8>, records: Vec<(usize, Records)>) -> Result<Self, String> {
        let mut last = 0;
        for (at, _) in &records {
            if *at < last || *at > body.len() {
                return Err(format!(
                    "a record set at {at} of a {}-byte body",
                    body.len()
                ));
            }
            last = *at;
        }
        Ok(Self {
            body: Bytes::from(body),
            records,
        })
    }

    /// The size of the whole body, records included.
    pub fn len(&self) -> usize {
        self.body.len() + self.records.iter().map(|(_, r)| r.len()).sum::<usize>()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The body in the order it is sent: the guest's bytes cut at each
    /// record set's place, the record sets between them.
    pub fn parts(&self) -> Vec<Records> {
        let mut parts = Vec::with_capacity(2 * self.records.len() + 1);
        let mut from = 0;
        for (at, records) in &self.records {
            parts.push(Records::Memory(self.body.slice(from..*at)));
            parts.push(records.clone());
            from = *at;
        }
        parts.push(Records::Memory(self.body.slice(from..)));
        parts.retain(|part| !part.is_empty());
        parts
    }

    /// The whole body in one buffer (a copy when it references records,
    /// which are read from their files): for interceptors, which read the
    /// whole response, and for a shadow version to compare against.
    pub fn to_vec(&self) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(self.len());
        for part in self.parts() {
            out.extend_from_slice(&part.load()?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_go_in_their_places() {
        let records = vec![
            (2, Records::from(Bytes::from_static(b"RR"))),
            (2, Records::from(Bytes::from_static(b"S"))),
        ];
        let body = ResponseBody::referencing(b"abcd".to_vec(), records).unwrap();
        assert_eq!(body.to_vec().unwrap(), b"abRRScd");
        assert_eq!(body.len(), 7);
        assert_eq!(body.parts().len(), 4);
        let at_end = ResponseBody::referencing(
            b"ab".to_vec(),
            vec![(2, Records::from(Bytes::from_static(b"R")))],
        );
        assert_eq!(at_end.unwrap().to_vec().unwrap(), b"abR");
    }

    #[test]
    fn places_out_of_order_or_outside_are_refused() {
        let r = || Records::from(Bytes::from_static(b"R"));
        assert!(ResponseBody::referencing(b"ab".to_vec(), vec![(3, r())]).is_err());
        assert!(ResponseBody::referencing(b"abc".to_vec(), vec![(2, r()), (1, r())]).is_err());
        assert_eq!(ResponseBody::plain(b"ab".to_vec()).parts().len(), 1);
    }
}
