/** Socket helpers of the TCP transport: failure events, and closing with or without a flush. */
import type net from 'node:net';

/** How long a closing transport waits for its goodbyes to reach the kernel. */
const kFlushMs = 1000;

/** Calls `fail` with a cause on error, end or close of `socket`. */
export function watch(socket: net.Socket, role: 'receive' | 'send', fail: (cause: string) => void): void {
  socket.on('error', (error) => fail(`connection failed: ${describeError(error)} [${role} link]`));
  socket.on('end', () => fail(`closed the connection [${role} link]`));
  socket.on('close', () => fail(`connection closed [${role} link]`));
}

export function describeError(error: Error): string {
  const code = (error as NodeJS.ErrnoException).code;
  return code ? `${code} (${error.message})` : error.message;
}

/** Ends the socket once what was written reached the kernel, waiting at most kFlushMs. */
export function flushed(socket: net.Socket): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, kFlushMs);
    timer.unref();
    socket.end(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

export function destroyAndWait(socket: net.Socket): Promise<void> {
  if (socket.closed) return Promise.resolve();
  return new Promise((resolve) => {
    socket.once('close', () => resolve());
    socket.destroy();
  });
}
