import { createServer } from 'node:net';

/**
 * A TCP port that was free a moment ago on `host`: bind port 0, read what the kernel chose,
 * close. Racy by nature: another process may take the port before rank 0 binds it. The
 * window is a few milliseconds and the kernel hands out ephemeral ports round-robin, so a
 * collision is rare; when it happens rank 0 fails to bind and the job fails fast (rerun it).
 */
export function findFreePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen({ host, port: 0, exclusive: true }, () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => (port > 0 ? resolve(port) : reject(new Error(`could not read a free port on ${host}`))));
    });
  });
}
