import { describe, expect, it } from '@jest/globals';
import { executeNamed, parseTemplate, TemplateError } from './template.js';

/** Renders one source as a file template, with its defines available. */
function render(src: string, data: unknown = {}): string {
  const { nodes, defines } = parseTemplate(src, 't.yaml');
  const templates = new Map([['t.yaml', nodes], ...defines]);
  return executeNamed({ templates, file: 't.yaml', depth: 0 }, 't.yaml', data);
}

describe('template engine', () => {
  it('substitutes fields, variables and $', () => {
    expect(render('a={{ .Values.a }} b={{ $.Release.Name }}', { Values: { a: 1 }, Release: { Name: 'r' } })).toBe('a=1 b=r');
    expect(render('{{ $x := .a }}{{ $x }}-{{ $x = "y" }}{{ $x }}', { a: 'x' })).toBe('x-y');
  });

  it('trims white space at {{- and -}} only', () => {
    expect(render('a  \n  {{- "b" -}}  \n  c')).toBe('abc');
    expect(render('a \n{{ "b" }}\n c')).toBe('a \nb\n c');
    // "{{-3}}" is the number -3, not a trim marker.
    expect(render('x {{-3}}')).toBe('x -3');
    expect(render('a\n{{- /* note */ -}}\nb')).toBe('ab');
  });

  it('renders a missing value as empty, and fails on a field of nil', () => {
    expect(render('[{{ .Values.missing }}]', { Values: {} })).toBe('[]');
    expect(() => render('{{ .Values.missing.deeper }}', { Values: {} })).toThrow(/nil pointer evaluating interface \{\}\.deeper/);
  });

  it('chooses if / else if / else branches by Go truth', () => {
    const t = '{{ if .a }}A{{ else if .b }}B{{ else }}C{{ end }}';
    expect(render(t, { a: 1, b: 1 })).toBe('A');
    expect(render(t, { a: 0, b: 'x' })).toBe('B');
    expect(render(t, { a: '', b: [] })).toBe('C');
    expect(render(t, { a: {}, b: false })).toBe('C');
  });

  it('ranges over lists, over maps in sorted key order, and into else when empty', () => {
    expect(render('{{ range $i, $v := .l }}{{ $i }}={{ $v }};{{ end }}', { l: ['a', 'b'] })).toBe('0=a;1=b;');
    expect(render('{{ range $k, $v := .m }}{{ $k }}={{ . }};{{ end }}', { m: { z: 1, a: 2, m: 3 } })).toBe('a=2;m=3;z=1;');
    expect(render('{{ range .l }}x{{ else }}none{{ end }}', { l: [] })).toBe('none');
  });

  it('scopes variables to their control structure', () => {
    expect(() => render('{{ if true }}{{ $x := 1 }}{{ end }}{{ $x }}')).toThrow(/undefined variable "\$x"/);
  });

  it('sets dot in with, and takes else when empty', () => {
    expect(render('{{ with .a }}{{ .b }}{{ else }}no{{ end }}', { a: { b: 'in' } })).toBe('in');
    expect(render('{{ with .a }}{{ .b }}{{ else }}no{{ end }}', { a: null })).toBe('no');
  });

  it('defines, includes and calls templates with their own dot', () => {
    const t = '{{- define "greet" }}hi {{ .name }}{{ end -}}{{ include "greet" (dict "name" .n) | quote }} {{ template "greet" . }}';
    expect(render(t, { n: 'x', name: 'y' })).toBe('"hi x" hi y');
  });

  it('implements the helm and sprig functions the chart uses', () => {
    expect(render('{{ toYaml .v | nindent 2 }}', { v: { b: [1, 'on'], a: 'x' } })).toBe('\n  a: x\n  b:\n    - 1\n    - "on"');
    expect(render('{{ "a\\nb" | indent 2 }}')).toBe('  a\n  b');
    expect(render('{{ quote "a\\"b" }}')).toBe('"a\\"b"');
    expect(render('{{ .v | default "d" }}|{{ .w | default "d" }}', { v: '', w: 'w' })).toBe('d|w');
    expect(render('{{ printf "%s-%d-%v-%q" "a" 2 true "q" }}')).toBe('a-2-true-"q"');
    expect(render('{{ "abc" | b64enc }}')).toBe('YWJj');
    expect(render('{{ "abcdef" | trunc 3 }}{{ "abcdef" | trunc -2 }}')).toBe('abcef');
    expect(render('{{ "name-" | trimSuffix "-" }}')).toBe('name');
    expect(render('{{ eq .a "x" }} {{ eq .a "y" "x" }} {{ ne .a "x" }} {{ not .a }}', { a: 'x' })).toBe('true true false false');
    expect(render('{{ index .m "a-b" }}', { m: { 'a-b': 7 } })).toBe('7');
    expect(render('{{ "x" | sha256sum | trunc 8 }}')).toBe('2d711642');
    expect(render('{{ 8291 | toString | quote }}')).toBe('"8291"');
    // Values are float64 in helm: large ones print with an exponent, as helm prints them.
    expect(render('{{ .a }} {{ .b }} {{ .c }} {{ .d }}', { a: 999999, b: 1000000, c: 123456789, d: 0.5 })).toBe(
      '999999 1e+06 1.23456789e+08 0.5',
    );
  });

  it('evaluates and / or lazily, like Go 1.18+', () => {
    // .q is nil: .q.enabled would fail if evaluated.
    expect(render('{{ if and .q .q.enabled }}y{{ else }}n{{ end }}', { q: null })).toBe('n');
    expect(render('{{ or .a .q.x }}', { a: 'first', q: null })).toBe('first');
  });

  it('fails with the message of required and fail', () => {
    expect(() => render('{{ required "give me a key" .k }}', { k: '' })).toThrow(/execution error at \(t\.yaml:1\): give me a key/);
    expect(render('{{ required "m" .k }}', { k: 'v' })).toBe('v');
    expect(() => render('{{ fail "no way" }}')).toThrow(/no way/);
  });

  it('refuses what is outside the subset instead of guessing', () => {
    expect(() => render('{{ upper "x" }}')).toThrow(TemplateError);
    expect(() => render('{{ block "x" . }}{{ end }}')).toThrow(/outside the supported template subset/);
    expect(() => render('{{ if true }}x')).toThrow(/without \{\{end\}\}/);
    expect(() => render('{{ "x" | .a }}', { a: 1 })).toThrow(/can't give argument to non-function/);
    expect(() => render('{{ constructor }}')).toThrow(/not defined/);
  });
});
