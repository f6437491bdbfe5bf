/**
 * The simulator backend, assembled: a world of N simulated transports on one virtual clock
 * (sim_transport.ts), the machine it models (network_model.ts), and the scaling that lets a small
 * real buffer stand for a large simulated one (scale.ts). It lives in one thread and has no
 * backend factory: like the memory world, only the code that holds it can use it.
 */
export { VirtualClock } from './clock.js';
export { createNetworkModel, type LinkCost, type NetworkModel, type NetworkParams } from './network_model.js';
export { kMinBlockElements, type ScaledBuffer, scaleDown } from './scale.js';
export { createSimWorld, kDefaultSimIoTimeout, SimTransport, type SimWorld, type SimWorldOptions } from './sim_transport.js';
