/**
 * Runs first in a browser rank's program worker (the program bundle imports it before the
 * program): what the program prints goes to ringrun, as a Node rank's stdout and stderr do, and
 * an uncaught error or unhandled rejection fails the rank, as it would end a Node process.
 * The console of the browser's developer tools still shows everything.
 */
import type { PageToPrelude, PreludeToPage } from '../page_protocol.js';
import { formatLine } from './format.js';

type Method = 'log' | 'info' | 'debug' | 'warn' | 'error';
const kStreams: Record<Method, 'stdout' | 'stderr'> = {
  log: 'stdout',
  info: 'stdout',
  debug: 'stdout',
  warn: 'stderr',
  error: 'stderr',
};

const scope = globalThis as unknown as {
  postMessage(message: PreludeToPage): void;
  addEventListener(
    type: string,
    listener: (event: { error?: unknown; message?: string; reason?: unknown; data?: unknown }) => void,
  ): void;
};

for (const method of Object.keys(kStreams) as Method[]) {
  const original = console[method].bind(console);
  console[method] = (...args: unknown[]) => {
    original(...args);
    scope.postMessage({ type: 'ringreduce:output', stream: kStreams[method], text: `${formatLine(args)}\n` });
  };
}

// Messages are handled in order: a pong goes out after whatever the program reported before it.
scope.addEventListener('message', (event) => {
  if ((event.data as PageToPrelude | undefined)?.type === 'ringreduce:ping') scope.postMessage({ type: 'ringreduce:pong' });
});
scope.addEventListener('error', (event) => {
  scope.postMessage({ type: 'ringreduce:uncaught', message: describe(event.error ?? event.message) });
});
scope.addEventListener('unhandledrejection', (event) => {
  scope.postMessage({ type: 'ringreduce:uncaught', message: describe(event.reason) });
});

function describe(value: unknown): string {
  if (value instanceof Error) return value.stack?.includes(value.message) ? value.stack : `${value.name}: ${value.message}`;
  return formatLine([value]);
}
