#pragma once
// The SpamAssassin public mail corpus and the cleaning of raw emails into text for a classifier.
//
// Corpus layout (as scripts/fetch-spam-corpus.sh writes it, and as tests/data/spam-sample/ has it):
//   <dir>/<group>/<name>.json    group: easy-ham-1, easy-ham-2, hard-ham-1, spam-1, spam-2
// each file a JSON object {"id": "00001", "group": "easy-ham-1", "checksum": {...},
// "text": "<the raw RFC 822 message>"}. A group whose name starts with "spam" holds spam, one whose
// name contains "ham" holds ham, and any other group name is a ValueError naming the file.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tapegrad::examples {

// A header of the message, its name in lower case, its value unfolded and RFC 2047-decoded.
struct HeaderField {
  std::string name;
  std::string value;
};

// The headers the transformer reads (spam::email_tokens) besides Subject: who sent the message
// and how (from, reply-to, to, cc, return-path, message-id, date, organization, x-mailer,
// user-agent), its MIME envelope (mime-version, content-type), priority marks (x-priority,
// x-msmail-priority, importance, precedence) and mailing-list fields (list-id,
// list-unsubscribe). Received lines and the rest are read by the linear model alone.
const std::vector<std::string>& kept_header_names();
// Whether name (lower case) is one of kept_header_names().
bool is_kept_header(std::string_view name);

struct Email {
  std::string id;                    // the file name without .json, e.g. "00001.7c53336b37003a9286aba55d2945844c"
  std::string group;                 // e.g. "spam-2"; empty for a raw mail file
  bool spam = false;                 // from the group; false for a raw mail file (unknown)
  std::string subject;               // the decoded Subject header
  std::string body;                  // the cleaned body (see clean_email)
  std::vector<HeaderField> headers;  // every top-level header, in message order (Subject too)
  bool truncated = false;            // only the head of a raw mail file was read (read_email_file's max_bytes)

  // What a classifier reads: the subject, a newline, the body.
  std::string text() const { return subject + "\n" + body; }
};

// Splits a raw message into its decoded Subject and cleaned body:
//  - RFC 2047 encoded words in the Subject (and in every top-level header given to `headers`)
//    are decoded;
//  - quoted-printable and base64 transfer encodings of text parts are decoded;
//  - multipart messages keep their text parts (text/plain preferred over text/html inside
//    multipart/alternative), recurse into nested multiparts and message/rfc822, and drop
//    attachments and non-text parts; a body without Content-Type that still has MIME parts
//    (a "--boundary" line followed by a Content-Type line, after at most one line of preamble)
//    is read as multipart;
//  - HTML (a text/html part, or any text part containing <html or <body) loses its tags, comments,
//    <script> and <style> contents; block tags become line breaks; entities such as &amp; &lt;
//    &gt; &quot; &#39; &nbsp; and numeric ones are decoded;
//  - bytes that are not valid UTF-8 are read as Windows-1252 (Latin-1 with typographic characters
//    at 0x80..0x9F), and control characters other than tab and newline are dropped, so the
//    result is always valid UTF-8; charsets are otherwise not converted;
//  - runs of spaces are collapsed, lines trimmed, and blank lines collapsed to one.
// Text without a header block (lines of "Name: value" or an mbox "From " line, ended by a blank
// line or the end of the text) is treated as a plain body.
// `headers`, when given, receives every top-level header (Received lines and Subject among them), in
// message order, each value unfolded, decoded and on one line.
void parse_email(std::string_view raw, std::string& subject, std::string& body,
                 std::vector<HeaderField>* headers = nullptr);

// The subject, a newline, and the body, as parse_email gives them.
std::string clean_email(std::string_view raw);

// Every <dir>/<group>/*.json email, ordered by group then file name. IoError when the folder
// does not exist or holds no email (the message says to run scripts/fetch-spam-corpus.sh);
// ValueError naming the file and the field for a malformed file.
std::vector<Email> load_spam_corpus(const std::string& dir);

// One email: a corpus JSON file (name ending in .json) or a raw RFC 822 message file, of which
// at most max_bytes are read (Email::truncated says when the rest was left).
Email read_email_file(const std::string& path, std::uint64_t max_bytes = UINT64_MAX);

// $TAPEGRAD_DATA/spam-assassin when TAPEGRAD_DATA is set, else <source tree>/data/corpora/spam-assassin
// (the folder scripts/fetch-spam-corpus.sh fills; git-ignored).
std::string default_spam_corpus_dir();

}  // namespace tapegrad::examples
