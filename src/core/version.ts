/**
 * This package's version, as package.json says. A constant rather than a read of package.json
 * at load time: a browser rank has no file system, and a bundler would otherwise have to ship
 * package.json. `npm version` rewrites it (scripts/sync-version.mjs, the "version" script), and
 * a unit test (test/unit/version.test.ts) fails if the two ever differ.
 */
export const kVersion = '0.1.0';
