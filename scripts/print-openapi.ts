import { writeFileSync } from 'node:fs';
import { endpoints } from '../src/rest/endpoints.js';
import { buildOpenApiDocument } from '../src/rest/openapi.js';

/** `npm run openapi [-- <file>]`: the OpenAPI 3.1 document (as served at /openapi.json), to stdout or a file. */
const json = `${JSON.stringify(buildOpenApiDocument(endpoints), null, 2)}\n`;
const file = process.argv[2];
if (file) {
  writeFileSync(file, json);
  console.error(`${file} written`);
} else {
  process.stdout.write(json);
}
