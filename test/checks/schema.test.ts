import { readFileSync } from 'node:fs';
import {
  type GraphQLField,
  type GraphQLNamedType,
  isEnumType,
  isInputObjectType,
  isInterfaceType,
  isIntrospectionType,
  isNonNullType,
  isObjectType,
  isSpecifiedScalarType,
} from 'graphql';
import { describe, expect, it } from 'vitest';
import { schema } from '../../src/schema/index.js';
import { printedSchema } from '../../src/schema/print.js';

/** Every named thing of our own schema that has no description, as `Type`, `Type.field`, `Type.field(arg)`. */
function undescribed(): string[] {
  const missing: string[] = [];
  const check = (name: string, description: string | null | undefined) => {
    if (!description?.trim()) missing.push(name);
  };
  const ours = (type: GraphQLNamedType) => !isSpecifiedScalarType(type) && !isIntrospectionType(type);
  for (const type of Object.values(schema.getTypeMap()).filter(ours)) {
    check(type.name, type.description);
    if (isObjectType(type) || isInterfaceType(type)) {
      for (const field of Object.values<GraphQLField<unknown, unknown>>(type.getFields())) {
        check(`${type.name}.${field.name}`, field.description);
        for (const arg of field.args) check(`${type.name}.${field.name}(${arg.name})`, arg.description);
      }
    }
    if (isInputObjectType(type)) {
      for (const field of Object.values(type.getFields())) check(`${type.name}.${field.name}`, field.description);
    }
    if (isEnumType(type)) {
      for (const value of type.getValues()) check(`${type.name}.${value.name}`, value.description);
    }
  }
  return missing;
}

describe('GraphQL schema', () => {
  it('schema.graphql is the printed schema (run `npm run schema:print` after a change)', () => {
    const committed = readFileSync(new URL('../../schema.graphql', import.meta.url), 'utf8');
    expect(committed, 'schema.graphql is stale: run `npm run schema:print`').toBe(printedSchema());
  });

  it('every type, field, argument and enum value has a description', () => {
    expect(undescribed()).toEqual([]);
  });

  it('the two bootstraps are non-null queries', () => {
    const query = schema.getQueryType()?.getFields();
    expect(isNonNullType(query?.visitorBootstrap?.type)).toBe(true);
    expect(isNonNullType(query?.agentWorkbench?.type)).toBe(true);
    expect(String(query?.visitorBootstrap?.type)).toBe('VisitorBootstrap!');
    expect(String(query?.agentWorkbench?.type)).toBe('Workbench!');
  });

  it('field names are camelCase: the snake_case legacy names live only in the REST layer', () => {
    const snake: string[] = [];
    for (const type of Object.values(schema.getTypeMap())) {
      if (isIntrospectionType(type) || !(isObjectType(type) || isInputObjectType(type))) continue;
      for (const name of Object.keys(type.getFields())) if (name.includes('_')) snake.push(`${type.name}.${name}`);
    }
    expect(snake).toEqual([]);
  });
});
