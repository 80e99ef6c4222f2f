//! The two framings under NRI's API: the multiplexer that carries two byte streams over one
//! socket, and ttrpc's messages inside each stream.
//!
//! - **Multiplexer** (NRI's `pkg/net/multiplex`): every frame is an 8-byte header — connection
//!   id and payload length, both big-endian `u32` — and the payload. Connection 1 carries the
//!   plugin's service (the runtime calls the plugin), connection 2 the runtime's (the plugin
//!   calls the runtime). A connection is a byte stream: a message may span frames.
//! - **ttrpc** (containerd's lightweight gRPC): every message is a 10-byte header — payload
//!   length and stream id (big-endian `u32`), message type and flags (one byte each) — and a
//!   protobuf payload. A unary call is one request and one response with the same stream id;
//!   the caller numbers its streams 1, 3, 5, …
//!
//! Nothing here does I/O: [`encode_frames`] turns a message into frames to write, and
//! [`Streams`] reassembles the messages of both connections from the frames read.

use thiserror::Error;

/// The multiplexer connection on which the runtime calls the plugin.
pub const PLUGIN_SERVICE: u32 = 1;
/// The multiplexer connection on which the plugin calls the runtime.
pub const RUNTIME_SERVICE: u32 = 2;

/// Length of a multiplexer frame's header.
pub const FRAME_HEADER: usize = 8;
/// Length of a ttrpc message's header.
pub const MESSAGE_HEADER: usize = 10;
/// The largest ttrpc payload either side accepts (ttrpc's `messageLengthMax`).
pub const MAX_MESSAGE: usize = 4 << 20;
/// The largest frame payload this side writes. The runtime's reader hands each frame to a
/// 4 KiB buffered reader that fails on a frame larger than its buffer unless it reads into a
/// larger buffer of its own, so frames are kept within 4 KiB.
pub const MAX_FRAME_PAYLOAD: usize = 4096;

/// A ttrpc message's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A call.
    Request,
    /// The answer to a call.
    Response,
    /// Stream data (not used by NRI's unary calls).
    Data,
}

impl Kind {
    fn code(self) -> u8 {
        match self {
            Self::Request => 1,
            Self::Response => 2,
            Self::Data => 3,
        }
    }

    fn from_code(code: u8) -> Option<Self> {
        match code {
            1 => Some(Self::Request),
            2 => Some(Self::Response),
            3 => Some(Self::Data),
            _ => None,
        }
    }
}

/// One ttrpc message, read from or to be written to a multiplexer connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The multiplexer connection it travels on.
    pub connection: u32,
    /// The ttrpc stream (call) it belongs to.
    pub stream: u32,
    /// Request, response or data.
    pub kind: Kind,
    /// The type-specific flags (0 for unary calls).
    pub flags: u8,
    /// The protobuf payload.
    pub payload: Vec<u8>,
}

/// Why the byte streams from the runtime cannot be read.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum WireError {
    /// A ttrpc message claims more than [`MAX_MESSAGE`] bytes.
    #[error("connection {connection}: a ttrpc message of {length} bytes exceeds the 4 MiB limit")]
    Oversized {
        /// The multiplexer connection.
        connection: u32,
        /// The length its header claims.
        length: usize,
    },
    /// A ttrpc header names a message type ttrpc does not have.
    #[error("connection {connection}: unknown ttrpc message type {code}")]
    UnknownKind {
        /// The multiplexer connection.
        connection: u32,
        /// The type byte.
        code: u8,
    },
    /// A frame arrived for a connection NRI does not use.
    #[error("a frame arrived for multiplexer connection {0}, which NRI does not use")]
    UnknownConnection(u32),
}

/// The frames (headers included) that carry `message` on its connection, ready to be written
/// to the socket in order.
pub fn encode_frames(message: &Message) -> Vec<u8> {
    let length = u32::try_from(message.payload.len()).unwrap_or(u32::MAX);
    let mut stream = Vec::with_capacity(MESSAGE_HEADER + message.payload.len());
    stream.extend_from_slice(&length.to_be_bytes());
    stream.extend_from_slice(&message.stream.to_be_bytes());
    stream.push(message.kind.code());
    stream.push(message.flags);
    stream.extend_from_slice(&message.payload);

    let frames = stream.len().div_ceil(MAX_FRAME_PAYLOAD);
    let mut out = Vec::with_capacity(stream.len() + frames * FRAME_HEADER);
    for chunk in stream.chunks(MAX_FRAME_PAYLOAD) {
        out.extend_from_slice(&message.connection.to_be_bytes());
        // A chunk is at most MAX_FRAME_PAYLOAD bytes: the cast cannot truncate.
        out.extend_from_slice(&(chunk.len() as u32).to_be_bytes());
        out.extend_from_slice(chunk);
    }
    out
}

/// The header of a multiplexer frame: its connection and payload length.
pub fn frame_header(header: [u8; FRAME_HEADER]) -> (u32, usize) {
    let connection = u32::from_be_bytes([header[0], header[1], header[2], header[3]]);
    let length = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
    (connection, length as usize)
}

/// Reassembles ttrpc messages from the payloads of multiplexer frames, per connection.
#[derive(Debug, Default)]
pub struct Streams {
    plugin: Vec<u8>,
    runtime: Vec<u8>,
}

impl Streams {
    /// Appends a frame's payload to its connection's stream and returns the messages it
    /// completed, in order.
    pub fn push(&mut self, connection: u32, payload: &[u8]) -> Result<Vec<Message>, WireError> {
        let buffer = match connection {
            PLUGIN_SERVICE => &mut self.plugin,
            RUNTIME_SERVICE => &mut self.runtime,
            other => return Err(WireError::UnknownConnection(other)),
        };
        buffer.extend_from_slice(payload);
        let mut messages = Vec::new();
        let mut consumed = 0;
        loop {
            let rest = &buffer[consumed..];
            if rest.len() < MESSAGE_HEADER {
                break;
            }
            let length = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
            if length > MAX_MESSAGE {
                return Err(WireError::Oversized { connection, length });
            }
            if rest.len() < MESSAGE_HEADER + length {
                break;
            }
            let stream = u32::from_be_bytes([rest[4], rest[5], rest[6], rest[7]]);
            let kind = Kind::from_code(rest[8]).ok_or(WireError::UnknownKind {
                connection,
                code: rest[8],
            })?;
            messages.push(Message {
                connection,
                stream,
                kind,
                flags: rest[9],
                payload: rest[MESSAGE_HEADER..MESSAGE_HEADER + length].to_vec(),
            });
            consumed += MESSAGE_HEADER + length;
        }
        buffer.drain(..consumed);
        Ok(messages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(connection: u32, stream: u32, payload: Vec<u8>) -> Message {
        Message {
            connection,
            stream,
            kind: Kind::Request,
            flags: 0,
            payload,
        }
    }

    /// Splits encoded frames back into (connection, payload) pairs.
    fn frames(mut bytes: &[u8]) -> Vec<(u32, Vec<u8>)> {
        let mut out = Vec::new();
        while !bytes.is_empty() {
            let header: [u8; FRAME_HEADER] = bytes[..FRAME_HEADER].try_into().unwrap();
            let (connection, length) = frame_header(header);
            out.push((
                connection,
                bytes[FRAME_HEADER..FRAME_HEADER + length].to_vec(),
            ));
            bytes = &bytes[FRAME_HEADER + length..];
        }
        out
    }

    #[test]
    fn a_small_message_is_one_frame_with_both_headers() {
        let bytes = encode_frames(&message(RUNTIME_SERVICE, 3, vec![0xaa, 0xbb]));
        assert_eq!(
            bytes,
            [
                0, 0, 0, 2, // connection 2
                0, 0, 0, 12, // frame payload: 10 + 2
                0, 0, 0, 2, // ttrpc length
                0, 0, 0, 3, // stream 3
                1, 0, // request, no flags
                0xaa, 0xbb,
            ]
        );
    }

    #[test]
    fn a_large_message_is_split_into_frames_of_at_most_4_kib_and_reassembled() {
        let payload: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let sent = message(PLUGIN_SERVICE, 7, payload);
        let bytes = encode_frames(&sent);
        let frames = frames(&bytes);
        assert_eq!(frames.len(), 3);
        assert!(frames.iter().all(|(_, p)| p.len() <= MAX_FRAME_PAYLOAD));

        let mut streams = Streams::default();
        let mut received = Vec::new();
        for (connection, payload) in frames {
            received.extend(streams.push(connection, &payload).unwrap());
        }
        assert_eq!(received, [sent]);
    }

    #[test]
    fn messages_split_anywhere_and_interleaved_across_connections_are_reassembled() {
        let first = message(PLUGIN_SERVICE, 1, b"configure".to_vec());
        let second = message(RUNTIME_SERVICE, 1, b"registered".to_vec());
        let third = message(PLUGIN_SERVICE, 3, Vec::new());
        let plugin_bytes: Vec<u8> = [&first, &third]
            .iter()
            .flat_map(|m| frames(&encode_frames(m)).into_iter().flat_map(|(_, p)| p))
            .collect();
        let runtime_bytes: Vec<u8> = frames(&encode_frames(&second))
            .into_iter()
            .flat_map(|(_, p)| p)
            .collect();

        let mut streams = Streams::default();
        let mut received = Vec::new();
        // One byte at a time on the plugin connection, the runtime's message in the middle.
        for (at, byte) in plugin_bytes.iter().enumerate() {
            if at == 5 {
                received.extend(streams.push(RUNTIME_SERVICE, &runtime_bytes).unwrap());
            }
            received.extend(streams.push(PLUGIN_SERVICE, &[*byte]).unwrap());
        }
        assert_eq!(received, [second, first, third]);
    }

    #[test]
    fn oversized_messages_unknown_types_and_connections_are_errors() {
        let mut streams = Streams::default();
        let mut header = vec![0x01, 0, 0, 0, 0, 0, 0, 1, 1, 0];
        assert_eq!(
            streams.push(PLUGIN_SERVICE, &header),
            Err(WireError::Oversized {
                connection: 1,
                length: 1 << 24
            })
        );
        header = vec![0, 0, 0, 0, 0, 0, 0, 1, 9, 0];
        assert_eq!(
            Streams::default().push(RUNTIME_SERVICE, &header),
            Err(WireError::UnknownKind {
                connection: 2,
                code: 9
            })
        );
        assert_eq!(
            Streams::default().push(3, &[]),
            Err(WireError::UnknownConnection(3))
        );
    }
}
