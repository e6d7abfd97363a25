// Builds authorizer.js into a component of the kafka-authorizer world
// with the @bytecodealliance/componentize-js library API (the jco CLI
// could not read our WIT package). Every WASI feature is disabled, so
// the component imports nothing but the broker's own interfaces.
//
// usage: node build.mjs OUT.wasm
import { readFile, writeFile, rename } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { componentize } from '@bytecodealliance/componentize-js';

const here = dirname(fileURLToPath(import.meta.url));
const out = resolve(process.argv[2] ?? join(here, 'authorizer_prefix_js.wasm'));
const { component } = await componentize(
  await readFile(join(here, 'authorizer.js'), 'utf8'),
  {
    witPath: resolve(here, '../../../wit'),
    worldName: 'kafka-authorizer',
    disableFeatures: ['stdio', 'random', 'clocks', 'http', 'fetch-event'],
  },
);
const tmp = `${out}.tmp`;
await writeFile(tmp, component);
await rename(tmp, out);
console.log(`wrote ${out} (${component.length} bytes)`);
