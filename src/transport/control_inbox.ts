/**
 * Delivers control messages to the engine's handler, in arrival order per peer, for every
 * backend. Messages that arrive before the engine has set its handler (a fast peer may report
 * while this rank is still starting) are held, copied (the backend may reuse a payload's bytes
 * once delivery returns), and delivered when it does. A handler that throws
 * is the engine's bug, not the link's: the error is rethrown outside the backend's read path.
 */
import type { ControlHandler } from './transport.js';

export class ControlInbox {
  private handler: ControlHandler | null = null;
  private readonly early: [number, Uint8Array][] = [];

  setHandler(handler: ControlHandler): void {
    this.handler = handler;
    for (const [peer, payload] of this.early.splice(0)) this.call(handler, peer, payload);
  }

  deliver(peer: number, payload: Uint8Array): void {
    if (this.handler) this.call(this.handler, peer, payload);
    else this.early.push([peer, payload.slice()]);
  }

  private call(handler: ControlHandler, peer: number, payload: Uint8Array): void {
    try {
      handler(peer, payload);
    } catch (error) {
      queueMicrotask(() => {
        throw error;
      });
    }
  }
}
