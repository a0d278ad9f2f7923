#include "examples/spam/spam_corpus.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "examples/spam/mail_text.h"
#include "tapegrad/autograd/error.h"
#include "tapegrad/io/file.h"
#include "tapegrad/io/json.h"

namespace tapegrad::examples {

namespace {

namespace fs = std::filesystem;
using namespace mail;

// Past this nesting depth of multiparts (or forwarded messages) parts are ignored: real mail
// stays far below it, and it bounds the recursion on hostile input.
constexpr int kMaxDepth = 16;

// The headers a message or MIME part needs to be read, and where a top-level block's headers all go.
struct Headers {
  std::string subject, content_type, transfer_encoding, disposition;
  bool has_subject = false;
  std::vector<HeaderField>* all = nullptr;  // where a top-level block's headers go, or nowhere
};

bool is_header_line(std::string_view line) {
  const std::size_t colon = line.find(':');
  if (colon == 0 || colon == std::string_view::npos) return false;
  for (std::size_t k = 0; k < colon; ++k)
    if (line[k] <= ' ' || line[k] > '~') return false;
  return true;
}

// Reads the header block at the start of `message` (unfolding continuation lines) and returns
// the body after it. A part starting with a blank line has no headers.
// `complete` tells whether the block ended as headers do: at a blank line or at the end.
std::string_view split_headers(std::string_view message, Headers& headers, bool top_level, bool* complete = nullptr) {
  if (complete) *complete = true;
  std::size_t pos = 0;
  std::string* current = nullptr;
  std::size_t current_field = SIZE_MAX;  // the field of `all` a continuation line extends, if any
  bool first = true;
  while (pos < message.size()) {
    std::size_t eol = message.find('\n', pos);
    if (eol == std::string_view::npos) eol = message.size();
    std::string_view line = message.substr(pos, eol - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) return message.substr(std::min(message.size(), eol + 1));
    if ((line.front() == ' ' || line.front() == '\t') && !first) {
      if (current) current->append(line);
      if (current_field != SIZE_MAX) (*headers.all)[current_field].value.append(line);
    } else if (top_level && first && line.substr(0, 5) == "From ") {
      current = nullptr;  // the mbox separator line
      current_field = SIZE_MAX;
    } else if (is_header_line(line)) {
      const std::size_t colon = line.find(':');
      const std::string name = to_lower(trim(line.substr(0, colon)));
      const std::string_view value = trim(line.substr(colon + 1));
      std::string* field = nullptr;
      if (name == "subject" && !headers.has_subject) field = &headers.subject, headers.has_subject = true;
      else if (name == "content-type" && headers.content_type.empty()) field = &headers.content_type;
      else if (name == "content-transfer-encoding" && headers.transfer_encoding.empty())
        field = &headers.transfer_encoding;
      else if (name == "content-disposition" && headers.disposition.empty()) field = &headers.disposition;
      current_field = SIZE_MAX;
      if (top_level && headers.all) {
        current_field = headers.all->size();
        headers.all->push_back({name, std::string(value)});
      }
      current = field;
      if (field) field->assign(value);
    } else {
      // Not a header: the header block ended without its blank line (or there was none).
      if (complete) *complete = false;
      return message.substr(pos);
    }
    first = false;
    pos = eol + 1;
  }
  return std::string_view();
}

struct ContentType {
  std::string type = "text/plain";
  std::string boundary;
};

ContentType parse_content_type(std::string_view value) {
  ContentType ct;
  if (trim(value).empty()) return ct;
  const std::size_t semi = value.find(';');
  ct.type = to_lower(trim(value.substr(0, semi)));
  std::size_t pos = semi;
  while (pos != std::string_view::npos && pos < value.size()) {
    const std::size_t start = pos + 1;
    const std::size_t eq = value.find('=', start);
    if (eq == std::string_view::npos) break;
    const std::string name = to_lower(trim(value.substr(start, eq - start)));
    std::size_t v = eq + 1;
    while (v < value.size() && (value[v] == ' ' || value[v] == '\t')) ++v;
    std::string param;
    if (v < value.size() && value[v] == '"') {
      const std::size_t end = value.find('"', v + 1);
      param = std::string(value.substr(v + 1, end == std::string_view::npos ? end : end - v - 1));
      pos = end == std::string_view::npos ? end : value.find(';', end);
    } else {
      const std::size_t end = value.find(';', v);
      param = std::string(trim(value.substr(v, end == std::string_view::npos ? end : end - v)));
      pos = end;
    }
    if (name == "boundary") ct.boundary = param;
  }
  return ct;
}

std::string extract_text(const Headers& headers, std::string_view body, int depth);

// The parts between "--boundary" lines (preamble and epilogue dropped).
std::vector<std::string_view> split_multipart(std::string_view body, const std::string& boundary) {
  std::vector<std::string_view> parts;
  const std::string delimiter = "--" + boundary;
  std::size_t part_start = std::string_view::npos;
  std::size_t pos = 0;
  while (pos < body.size()) {
    std::size_t eol = body.find('\n', pos);
    if (eol == std::string_view::npos) eol = body.size();
    const std::string_view line = body.substr(pos, eol - pos);
    if (line.size() >= delimiter.size() && line.compare(0, delimiter.size(), delimiter) == 0) {
      const std::string_view rest = trim(line.substr(delimiter.size()));
      if (rest.empty() || rest == "--") {
        if (part_start != std::string_view::npos) parts.push_back(body.substr(part_start, pos - part_start));
        if (rest == "--") return parts;
        part_start = eol + 1 <= body.size() ? eol + 1 : body.size();
      }
    }
    pos = eol + 1;
  }
  if (part_start != std::string_view::npos && part_start < body.size()) parts.push_back(body.substr(part_start));
  return parts;
}

// The text of one MIME part (empty for an attachment) and its content type.
std::string extract_part(std::string_view part, int depth, std::string& type) {
  Headers headers;
  const std::string_view body = split_headers(part, headers, false);
  type = parse_content_type(headers.content_type).type;
  if (istarts_with(trim(headers.disposition), "attachment")) return {};
  return extract_text(headers, body, depth);
}

// Some mail (spam mostly) is MIME multipart but lost its Content-Type header. Such a body shows
// itself by a "--boundary" line directly followed by a part's Content-Type line, at most a
// one-line preamble ("This is a MIME message") before it; further down, such lines are more
// likely a MIME example quoted in a plain-text mail.
std::string sniff_boundary(std::string_view body) {
  std::size_t pos = 0;
  int text_lines = 0;
  while (pos < body.size() && text_lines <= 1) {
    std::size_t eol = body.find('\n', pos);
    if (eol == std::string_view::npos) break;
    const std::string_view line = trim(body.substr(pos, eol - pos));
    if (line.size() > 2 && line.compare(0, 2, "--") == 0 && istarts_with(body.substr(eol + 1), "content-type:"))
      return std::string(line.substr(2));
    if (!line.empty()) ++text_lines;
    pos = eol + 1;
  }
  return {};
}

std::string extract_text(const Headers& headers, std::string_view body, int depth) {
  if (depth > kMaxDepth) return {};
  ContentType ct = parse_content_type(headers.content_type);
  if (trim(headers.content_type).empty()) {
    std::string boundary = sniff_boundary(body);
    if (!boundary.empty()) ct.type = "multipart/mixed", ct.boundary = std::move(boundary);
  }
  if (ct.type.rfind("multipart/", 0) == 0 && !ct.boundary.empty()) {
    const std::vector<std::string_view> parts = split_multipart(body, ct.boundary);
    if (!parts.empty()) {
      std::vector<std::string> texts;
      std::vector<bool> plain;
      for (std::string_view part : parts) {
        std::string type;
        std::string text = extract_part(part, depth + 1, type);
        if (trim(text).empty()) continue;
        plain.push_back(type == "text/plain");
        texts.push_back(std::move(text));
      }
      if (texts.empty()) return {};
      if (ct.type == "multipart/alternative") {
        // Alternatives say the same thing: keep one, the plain text if there is one.
        const auto it = std::find(plain.begin(), plain.end(), true);
        return it != plain.end() ? texts[static_cast<std::size_t>(it - plain.begin())] : texts.back();
      }
      std::string joined;
      for (const auto& text : texts) joined += (joined.empty() ? "" : "\n\n") + text;
      return joined;
    }
    // A multipart without any delimiter line: read it as plain text below.
  } else if (ct.type == "message/rfc822") {
    Headers inner;
    const std::string_view inner_body = split_headers(body, inner, true);
    const std::string text = extract_text(inner, inner_body, depth + 1);
    const std::string subject = sanitize_utf8(decode_rfc2047(inner.subject));
    return trim(subject).empty() ? text : subject + "\n" + text;
  } else if ((ct.type.rfind("text/", 0) != 0 && ct.type.rfind("multipart/", 0) != 0) ||
             ct.type == "text/rfc822-headers") {
    return {};  // images, applications, a bounce's copy of the headers ...: not text to read
  }

  const std::string encoding = to_lower(trim(headers.transfer_encoding));
  std::string decoded;
  if (encoding == "quoted-printable") decoded = decode_quoted_printable(body);
  else if (encoding == "base64") decoded = decode_base64(body);
  else decoded = std::string(body);
  decoded = sanitize_utf8(decoded);
  const bool html = ct.type == "text/html" || ifind(decoded, "<html") != std::string::npos ||
                    ifind(decoded, "<body") != std::string::npos;
  return html ? strip_html(decoded) : decoded;
}

bool starts_with_headers(std::string_view raw) {
  const std::size_t eol = raw.find('\n');
  std::string_view first = raw.substr(0, eol);
  if (!first.empty() && first.back() == '\r') first.remove_suffix(1);
  return first.substr(0, 5) == "From " || is_header_line(first);
}

std::string read_file(const std::string& path, const char* op, std::uint64_t max_bytes = std::uint64_t{1} << 34) {
  try {
    return io::read_file(path, max_bytes, io::Oversize::ReadHead);
  } catch (const IoError& e) {
    throw IoError(message(op, ": ", e.what()));
  }
}

Email email_from_json(const std::string& path, const std::string& fallback_group, const char* op) {
  nlohmann::json j;
  try {
    j = io::read_json_file(path);
  } catch (const IoError& e) {
    throw IoError(message(op, ": ", e.what()));
  }
  const std::string where = std::string(op) + ": '" + path + "': ";
  if (!j.is_object()) throw ValueError(where + "the top level must be a JSON object");
  const auto text = j.find("text");
  if (text == j.end()) throw ValueError(where + "field 'text' is missing");
  if (!text->is_string()) throw ValueError(where + "field 'text' must be a string");
  Email email;
  email.id = fs::path(path).stem().string();
  email.group = fallback_group;
  if (const auto group = j.find("group"); group != j.end()) {
    if (!group->is_string()) throw ValueError(where + "field 'group' must be a string");
    email.group = group->get<std::string>();
  }
  if (!email.group.empty()) {
    // Every folder of the corpus says which it holds; a name that says neither is a mistake (a
    // folder copied in by hand), not ham.
    const bool spam = email.group.rfind("spam", 0) == 0;
    if (!spam && email.group.find("ham") == std::string::npos)
      throw ValueError(where + "group " + io::json_excerpt(nlohmann::json(email.group), 40) +
                       " is neither spam (a name starting with \"spam\") nor ham (a name containing \"ham\")");
    email.spam = spam;
  }
  parse_email(text->get_ref<const std::string&>(), email.subject, email.body, &email.headers);
  return email;
}

}  // namespace

const std::vector<std::string>& kept_header_names() {
  static const std::vector<std::string> names = {
      "from",       "reply-to",          "to",         "cc",         "return-path",  "message-id",
      "date",       "organization",      "x-mailer",   "user-agent", "mime-version", "content-type",
      "x-priority", "x-msmail-priority", "importance", "precedence", "list-id",      "list-unsubscribe"};
  return names;
}

bool is_kept_header(std::string_view name) {
  const std::vector<std::string>& names = kept_header_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

void parse_email(std::string_view raw, std::string& subject, std::string& body, std::vector<HeaderField>* all) {
  Headers headers;
  std::vector<HeaderField> fields;
  headers.all = all ? &fields : nullptr;
  std::string_view content = raw;
  if (starts_with_headers(raw)) {
    // Text like "Note: call me\nBob" looks like a header at first; only a block that ends
    // like a header block is taken for one.
    bool complete = false;
    content = split_headers(raw, headers, true, &complete);
    if (!complete) {
      headers = Headers();
      fields.clear();
      content = raw;
    }
  }
  subject = normalize_whitespace(sanitize_utf8(decode_rfc2047(headers.subject)));
  std::replace(subject.begin(), subject.end(), '\n', ' ');
  body = normalize_whitespace(extract_text(headers, content, 0));
  if (all) {
    all->clear();
    for (HeaderField& field : fields) {
      std::string value = normalize_whitespace(sanitize_utf8(decode_rfc2047(field.value)));
      std::replace(value.begin(), value.end(), '\n', ' ');
      all->push_back({std::move(field.name), std::move(value)});
    }
  }
}

std::string clean_email(std::string_view raw) {
  std::string subject, body;
  parse_email(raw, subject, body);
  return subject + "\n" + body;
}

std::vector<Email> load_spam_corpus(const std::string& dir) {
  const std::string hint =
      ": run scripts/fetch-spam-corpus.sh to download the SpamAssassin corpus there "
      "(or set TAPEGRAD_DATA to the folder that holds spam-assassin/)";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw IoError("load_spam_corpus: no corpus folder '" + dir + "'" + hint);
  std::vector<std::pair<std::string, std::string>> files;  // (group, path)
  for (const auto& group : fs::directory_iterator(dir, ec)) {
    if (!group.is_directory()) continue;
    for (const auto& file : fs::directory_iterator(group.path(), ec))
      if (file.is_regular_file() && file.path().extension() == ".json")
        files.emplace_back(group.path().filename().string(), file.path().string());
  }
  if (ec) throw IoError("load_spam_corpus: cannot list '" + dir + "': " + ec.message());
  if (files.empty()) throw IoError("load_spam_corpus: no emails (<group>/*.json) in '" + dir + "'" + hint);
  std::sort(files.begin(), files.end());
  std::vector<Email> emails;
  emails.reserve(files.size());
  for (const auto& [group, path] : files) emails.push_back(email_from_json(path, group, "load_spam_corpus"));
  return emails;
}

Email read_email_file(const std::string& path, std::uint64_t max_bytes) {
  if (fs::path(path).extension() == ".json") return email_from_json(path, "", "read_email_file");
  Email email;
  email.id = fs::path(path).filename().string();
  const std::string text = read_file(path, "read_email_file", max_bytes);
  std::error_code ec;
  email.truncated = text.size() == max_bytes && fs::file_size(path, ec) > max_bytes;
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw ValueError(message("read_email_file: '", path, "' is empty (", text.size(), " bytes of white space)"));
  parse_email(text, email.subject, email.body, &email.headers);
  return email;
}

std::string default_spam_corpus_dir() {
  if (const char* root = std::getenv("TAPEGRAD_DATA"); root != nullptr && *root != '\0')
    return (fs::path(root) / "spam-assassin").string();
#ifdef TAPEGRAD_SOURCE_DIR
  return (fs::path(TAPEGRAD_SOURCE_DIR) / "data" / "corpora" / "spam-assassin").string();
#else
  return (fs::path("data") / "corpora" / "spam-assassin").string();
#endif
}

}  // namespace tapegrad::examples
