/**
 * LSP text document sync for a Python file open in JupyterLab's file editor: `didOpen` with
 * the whole text, `didChange` with the whole new text (full sync) when it changed, `didClose`.
 * Pure: the JupyterLab side passes the editor's text.
 */

import type { Send } from './notebookSync';

export class TextDocumentSync {
  private text = '';
  private version = 0;
  private opened = false;

  constructor(
    readonly uri: string,
    private readonly send: Send
  ) {}

  get isOpen(): boolean {
    return this.opened;
  }

  /** The text the server has (what its diagnostics and fixes are about). */
  get synced(): string {
    return this.text;
  }

  open(text: string): void {
    this.text = text;
    this.version = 1;
    this.opened = true;
    this.send('textDocument/didOpen', {
      textDocument: { uri: this.uri, languageId: 'python', version: this.version, text }
    });
  }

  /** Send the new text; nothing when it did not change. */
  update(text: string): boolean {
    if (!this.opened) {
      this.open(text);
      return true;
    }
    if (text === this.text) {
      return false;
    }
    this.text = text;
    this.version++;
    this.send('textDocument/didChange', {
      textDocument: { uri: this.uri, version: this.version },
      contentChanges: [{ text }]
    });
    return true;
  }

  close(): void {
    if (!this.opened) {
      return;
    }
    this.opened = false;
    this.send('textDocument/didClose', { textDocument: { uri: this.uri } });
  }
}
