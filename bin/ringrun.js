#!/usr/bin/env node
// The `ringrun` executable: runs the compiled CLI (npm run build produces dist/).
let cli;
try {
  cli = await import('../dist/src/launcher/cli.js');
} catch (error) {
  if (error?.code !== 'ERR_MODULE_NOT_FOUND') throw error;
  console.error(`ringrun: ${error.message}\nringrun: build ringreduce first: npm run build`);
  process.exit(1);
}
process.exitCode = await cli.main(process.argv.slice(2));
