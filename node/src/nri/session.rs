//! One connection to the runtime: register, answer its calls until it hangs up.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use prost::Message as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::UnixStream;
use tokio::net::unix::OwnedReadHalf;
use tokio::sync::{mpsc, oneshot};

use super::api::{self, code, event};
use super::error::Error;
use super::handler::{Deadline, Handler, Registration};
use super::wire::{self, FRAME_HEADER, Kind, Message, PLUGIN_SERVICE, RUNTIME_SERVICE, Streams};

/// How long registration may take before the runtime counts as unresponsive.
const REGISTRATION_TIMEOUT: Duration = Duration::from_secs(10);

/// The NRI version this plugin speaks (the API of `containerd/nri` v0.12).
const NRI_VERSION: &str = "v0.12.3";

/// How a session ended without an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The runtime closed the connection (it restarted, or dropped the plugin).
    Closed,
    /// The runtime asked the plugin to shut down.
    Shutdown,
}

/// Registers with the runtime on `stream` and answers its calls with `handler` until the
/// runtime hangs up or asks the plugin to shut down.
pub async fn serve<H: Handler>(
    stream: UnixStream,
    registration: &Registration,
    handler: Arc<H>,
) -> Result<Ended, Error> {
    let (reader, mut writer) = stream.into_split();
    let (out, mut outgoing) = mpsc::unbounded_channel::<Message>();
    let writing = tokio::spawn(async move {
        while let Some(message) = outgoing.recv().await {
            writer.write_all(&wire::encode_frames(&message)).await?;
        }
        Ok::<_, std::io::Error>(())
    });

    let pending = Pending::default();
    let reading = tokio::spawn(read_loop(
        reader,
        out.clone(),
        pending.clone(),
        Arc::clone(&handler),
    ));
    let client = Client {
        out,
        pending,
        next_stream: AtomicU32::new(1),
    };
    let register = api::RegisterPluginRequest {
        plugin_name: registration.name.clone(),
        plugin_idx: registration.index.clone(),
        nri_version: NRI_VERSION.to_owned(),
    };
    let registered = tokio::time::timeout(
        REGISTRATION_TIMEOUT,
        client.call("RegisterPlugin", &register),
    )
    .await;
    let result = match registered {
        Ok(Ok(_)) => {
            tracing::info!(plugin = %registration, "registered with the runtime");
            match reading.await {
                Ok(result) => result,
                Err(join) => Err(Error::Task(join.to_string())),
            }
        }
        Ok(Err(error)) => {
            reading.abort();
            Err(error)
        }
        Err(_) => {
            reading.abort();
            Err(Error::Timeout("RegisterPlugin"))
        }
    };
    writing.abort();
    result
}

/// Calls waiting for the runtime's answer, by stream id.
type Pending = Arc<Mutex<HashMap<u32, oneshot::Sender<api::Response>>>>;

/// The plugin's side of the runtime's service.
struct Client {
    out: mpsc::UnboundedSender<Message>,
    pending: Pending,
    next_stream: AtomicU32,
}

impl Client {
    /// Calls `method` of the runtime's service and returns its answer's payload.
    async fn call(
        &self,
        method: &'static str,
        request: &impl prost::Message,
    ) -> Result<Vec<u8>, Error> {
        let stream = self.next_stream.fetch_add(2, Ordering::Relaxed);
        let (answer, answered) = oneshot::channel();
        self.pending.lock().insert(stream, answer);
        let request = api::Request {
            service: api::RUNTIME_SERVICE_NAME.to_owned(),
            method: method.to_owned(),
            payload: request.encode_to_vec(),
            timeout_nano: 0,
        };
        self.out
            .send(Message {
                connection: RUNTIME_SERVICE,
                stream,
                kind: Kind::Request,
                flags: 0,
                payload: request.encode_to_vec(),
            })
            .map_err(|_| Error::Closed)?;
        let response = answered.await.map_err(|_| Error::Closed)?;
        match response.status {
            Some(status) if status.code != code::OK => Err(Error::Refused {
                method,
                message: status.message,
            }),
            _ => Ok(response.payload),
        }
    }
}

/// Reads frames until the runtime hangs up, answering its calls and routing its answers.
async fn read_loop<H: Handler>(
    mut reader: OwnedReadHalf,
    out: mpsc::UnboundedSender<Message>,
    pending: Pending,
    handler: Arc<H>,
) -> Result<Ended, Error> {
    let mut streams = Streams::default();
    let mut synchronizing = Synchronizing::default();
    let mut header = [0u8; FRAME_HEADER];
    loop {
        match reader.read_exact(&mut header).await {
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Ok(Ended::Closed);
            }
            Err(error) => return Err(Error::Io(error)),
        }
        let (connection, length) = wire::frame_header(header);
        if length > wire::MAX_MESSAGE + wire::MESSAGE_HEADER {
            return Err(Error::Wire(wire::WireError::Oversized {
                connection,
                length,
            }));
        }
        let mut payload = vec![0; length];
        reader.read_exact(&mut payload).await.map_err(Error::Io)?;
        for message in streams.push(connection, &payload).map_err(Error::Wire)? {
            match (message.connection, message.kind) {
                (PLUGIN_SERVICE, Kind::Request) => {
                    let call = Call {
                        stream: message.stream,
                        out: out.clone(),
                    };
                    let request = api::Request::decode(message.payload.as_slice())
                        .map_err(|e| Error::Decode("ttrpc request", e))?;
                    if let Some(ended) = dispatch(request, call, &handler, &mut synchronizing)? {
                        return Ok(ended);
                    }
                }
                (RUNTIME_SERVICE, Kind::Response) => {
                    let response = api::Response::decode(message.payload.as_slice())
                        .map_err(|e| Error::Decode("ttrpc response", e))?;
                    if let Some(answer) = pending.lock().remove(&message.stream) {
                        let _ = answer.send(response);
                    }
                }
                (connection, kind) => {
                    tracing::debug!(connection, ?kind, "ignoring a message NRI does not send");
                }
            }
        }
    }
}

/// Pods and containers of a synchronization that comes in parts.
#[derive(Default)]
struct Synchronizing {
    pods: Vec<api::PodSandbox>,
    containers: Vec<api::Container>,
}

/// Where the answer to one call of the runtime goes.
struct Call {
    stream: u32,
    out: mpsc::UnboundedSender<Message>,
}

impl Call {
    fn answer(self, result: Result<Vec<u8>, api::Status>) {
        let response = match result {
            Ok(payload) => api::Response {
                status: None,
                payload,
            },
            Err(status) => api::Response {
                status: Some(status),
                payload: Vec::new(),
            },
        };
        // A send fails only when the writer is gone: the session is ending anyway.
        let _ = self.out.send(Message {
            connection: PLUGIN_SERVICE,
            stream: self.stream,
            kind: Kind::Response,
            flags: 0,
            payload: response.encode_to_vec(),
        });
    }

    fn ok(self, message: &impl prost::Message) {
        self.answer(Ok(message.encode_to_vec()));
    }
}

/// Answers one call of the runtime; `Some` when the session ends with it.
fn dispatch<H: Handler>(
    request: api::Request,
    call: Call,
    handler: &Arc<H>,
    synchronizing: &mut Synchronizing,
) -> Result<Option<Ended>, Error> {
    if request.service != api::PLUGIN_SERVICE_NAME {
        call.answer(Err(unimplemented(&request)));
        return Ok(None);
    }
    let payload = request.payload.as_slice();
    match request.method.as_str() {
        "Configure" => {
            let configure = api::ConfigureRequest::decode(payload)
                .map_err(|e| Error::Decode("ConfigureRequest", e))?;
            handler.configured(&configure.runtime_name, &configure.runtime_version);
            call.ok(&api::ConfigureResponse {
                events: event::mask(event::CREATE_CONTAINER),
            });
        }
        "Synchronize" => {
            let part = api::SynchronizeRequest::decode(payload)
                .map_err(|e| Error::Decode("SynchronizeRequest", e))?;
            synchronizing.pods.extend(part.pods);
            synchronizing.containers.extend(part.containers);
            if !part.more {
                let done = std::mem::take(synchronizing);
                handler.synchronize(done.pods, done.containers);
            }
            call.ok(&api::SynchronizeResponse { more: part.more });
        }
        "CreateContainer" => {
            let deadline = Deadline::from_request(request.timeout_nano);
            let create = api::CreateContainerRequest::decode(payload)
                .map_err(|e| Error::Decode("CreateContainerRequest", e))?;
            let handler = Arc::clone(handler);
            // Containers of different pods are created concurrently; none waits for another.
            tokio::spawn(async move {
                let pod = create.pod.unwrap_or_default();
                let container = create.container.unwrap_or_default();
                match handler.create_container(pod, container, deadline).await {
                    Ok(adjust) => call.ok(&api::CreateContainerResponse {
                        adjust: Some(adjust),
                    }),
                    Err(refusal) => call.answer(Err(api::Status {
                        code: code::UNKNOWN,
                        message: refusal,
                    })),
                }
            });
        }
        "Shutdown" => {
            call.ok(&api::Empty {});
            return Ok(Some(Ended::Shutdown));
        }
        // Events the plugin did not subscribe to; a runtime may still send them.
        "StateChange"
        | "RunPodSandbox"
        | "StopPodSandbox"
        | "RemovePodSandbox"
        | "StopContainer"
        | "RemoveContainer"
        | "StartContainer"
        | "PostCreateContainer"
        | "PostStartContainer"
        | "PostUpdateContainer"
        | "PostUpdatePodSandbox" => {
            call.ok(&api::Empty {});
        }
        _ => call.answer(Err(unimplemented(&request))),
    }
    Ok(None)
}

fn unimplemented(request: &api::Request) -> api::Status {
    api::Status {
        code: code::UNIMPLEMENTED,
        message: format!(
            "the Tandem node component does not serve {}/{}",
            request.service, request.method
        ),
    }
}
