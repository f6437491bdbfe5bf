/** Addresses of this host, for binding and advertising (transport/tcp/index.ts, the launcher). */
import { networkInterfaces } from 'node:os';
import { InvalidArgumentError } from '../core/errors.js';

/** The first IPv4 address of a network interface (else its first address); throws naming it. */
export function interfaceAddress(name: string): string {
  const addresses = networkInterfaces()[name];
  if (addresses === undefined || addresses.length === 0) {
    const known = Object.keys(networkInterfaces()).join(', ');
    throw new InvalidArgumentError(`network interface "${name}" does not exist on this host (it has: ${known})`);
  }
  const chosen = addresses.find((a) => a.family === 'IPv4') ?? addresses[0];
  return chosen?.address as string;
}

export function isWildcard(host: string): boolean {
  return host === '0.0.0.0' || host === '::' || host === '';
}

export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || host.startsWith('127.');
}
