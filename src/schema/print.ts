import { writeFileSync } from 'node:fs';
import { lexicographicSortSchema, printSchema } from 'graphql';
import { schema } from './index.js';

export const printedSchema = () => `${printSchema(lexicographicSortSchema(schema))}\n`;

if (process.argv[1]?.endsWith('print.ts')) {
  writeFileSync(new URL('../../schema.graphql', import.meta.url), printedSchema());
  console.log('schema.graphql written');
}
