#!/usr/bin/env node
// The "version" script of package.json: `npm version` runs it after writing the new version
// into package.json and before its commit, so src/core/version.ts says the same version.
import { readFileSync, writeFileSync } from 'node:fs';

const root = new URL('../', import.meta.url);
const { version } = JSON.parse(readFileSync(new URL('package.json', root), 'utf8'));
const file = new URL('src/core/version.ts', root);
const text = readFileSync(file, 'utf8');
const next = text.replace(/export const kVersion = '[^']*';/, `export const kVersion = '${version}';`);
if (next === text && !text.includes(`'${version}'`)) throw new Error('src/core/version.ts: no kVersion line to rewrite');
writeFileSync(file, next);
