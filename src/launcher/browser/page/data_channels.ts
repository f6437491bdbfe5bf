/**
 * The page's half of a browser rank's data channels (the protocol and the why:
 * transport/web/data_channel_requests.ts): on the engine worker's request, a peer connection
 * and a negotiated data channel, handed to the engine at once, then the offer or answer with
 * every ICE candidate in it. The page keeps the peer connections (a worker cannot hold one)
 * and closes them when the engine has stopped (engine_host's `stopped`), so peers see the
 * channels close at once. Never before: an engine that saw its own channels close would report
 * its peers failed.
 */
import type { EngineToPage, PageToEngine } from '../../../transport/web/data_channel_requests.js';

/** ICE gathering on a LAN takes milliseconds; a STUN server can take seconds. */
const kGatherTimeoutMs = 10_000;

export interface DataChannelService {
  /** Closes every peer connection made for this engine. */
  closeAll(): void;
}

export function serveDataChannels(engine: Worker): DataChannelService {
  const connections = new Map<number, RTCPeerConnection>();
  const post = (message: PageToEngine, transfer: Transferable[] = []) => engine.postMessage(message, transfer);

  const closeAll = () => {
    for (const pc of connections.values()) pc.close();
    connections.clear();
  };

  engine.addEventListener('message', (event: MessageEvent<EngineToPage>) => {
    const message = event.data;
    if (message?.type === 'ringreduce:rtc-open') {
      const { id, offerer, iceServers } = message;
      const pc = new RTCPeerConnection({ iceServers });
      connections.set(id, pc);
      // Both sides create the same channel (negotiated, id 0), and it goes to the engine now:
      // Chromium transfers a data channel only before its first event.
      const channel = pc.createDataChannel('ringreduce', { negotiated: true, id: 0, ordered: true });
      post({ type: 'ringreduce:rtc-channel', id, channel }, [channel as unknown as Transferable]);
      if (offerer) {
        void describe(pc, () => pc.createOffer()).then(
          (sdp) => post({ type: 'ringreduce:rtc-description', id, kind: 'offer', sdp }),
          (error: Error) => post({ type: 'ringreduce:rtc-failed', id, message: `creating the offer: ${error.message}` }),
        );
      }
    } else if (message?.type === 'ringreduce:rtc-description') {
      const { id, kind, sdp } = message;
      const pc = connections.get(id);
      if (pc === undefined) return;
      const applied = pc.setRemoteDescription({ type: kind, sdp });
      if (kind === 'offer') {
        void applied
          .then(() => describe(pc, () => pc.createAnswer()))
          .then(
            (answer) => post({ type: 'ringreduce:rtc-description', id, kind: 'answer', sdp: answer }),
            (error: Error) => post({ type: 'ringreduce:rtc-failed', id, message: `answering: ${error.message}` }),
          );
      } else {
        applied.catch((error: Error) =>
          post({ type: 'ringreduce:rtc-failed', id, message: `taking the answer: ${error.message}` }),
        );
      }
    } else if (message?.type === 'ringreduce:rtc-close-all') closeAll();
  });
  return { closeAll };
}

/** Sets the local description `make` creates and returns it once every ICE candidate is in it. */
async function describe(pc: RTCPeerConnection, make: () => Promise<RTCSessionDescriptionInit>): Promise<string> {
  await pc.setLocalDescription(await make());
  if (pc.iceGatheringState !== 'complete') {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, kGatherTimeoutMs);
      pc.addEventListener('icegatheringstatechange', () => {
        if (pc.iceGatheringState === 'complete') {
          clearTimeout(timer);
          resolve();
        }
      });
    });
  }
  return pc.localDescription?.sdp ?? '';
}
