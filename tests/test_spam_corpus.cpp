// The spam example's corpus loader and email cleaning (examples/spam/spam_corpus.h).

#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "examples/spam/spam_corpus.h"
#include "tapegrad/autograd/error.h"
#include "tests/testing.h"

using namespace tapegrad;
using namespace tapegrad::examples;
using testing::TempDir;
using testing::write_text;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

const std::string kSampleDir = std::string(TAPEGRAD_TEST_DATA_DIR) + "/spam-sample";

// True if some line is a long run of base64 characters, as an undecoded attachment would be.
bool has_base64_line(const std::string& text) {
  std::size_t run = 0;
  for (char c : text) {
    const bool b64 = std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/' || c == '=';
    run = b64 ? run + 1 : 0;
    if (run >= 60) return true;
  }
  return false;
}

const Email* find_email(const std::vector<Email>& emails, const std::string& group, const std::string& id_prefix) {
  for (const Email& e : emails)
    if (e.group == group && e.id.rfind(id_prefix, 0) == 0) return &e;
  return nullptr;
}

}  // namespace

// ---------------------------------------------------------------- email cleaning

TEST_CASE("spam corpus: clean_email drops headers, keeps the subject, decodes quoted-printable") {
  const std::string raw =
      "From someone@example.com  Thu Aug 22 12:36:23 2002\n"
      "Return-Path: <someone@example.com>\n"
      "Received: from mail.example.com\n"
      "\tby relay.example.com; Thu, 22 Aug 2002\n"
      "Subject: Cheap\n"
      " offer =?iso-8859-1?Q?f=FCr_you?=\n"
      "Content-Type: text/plain; charset=iso-8859-1\n"
      "Content-Transfer-Encoding: quoted-printable\n"
      "\n"
      "Price: 10 =3D 5 + 5, caf=E9 incl=\n"
      "uded.\n";
  std::string subject, body;
  parse_email(raw, subject, body);
  CHECK(subject == "Cheap offer f\xC3\xBCr you");
  CHECK(body == "Price: 10 = 5 + 5, caf\xC3\xA9 included.");
  const std::string text = clean_email(raw);
  CHECK(text == subject + "\n" + body);
  CHECK_FALSE(contains(text, "Received"));
  CHECK_FALSE(contains(text, "relay.example.com"));
  CHECK_FALSE(contains(text, "Return-Path"));
}

TEST_CASE("spam corpus: parse_email gives every top-level header, unfolded and decoded, in message order") {
  const std::string raw =
      "From someone@example.com  Thu Aug 22 12:36:23 2002\n"
      "Return-Path: <someone@example.com>\n"
      "Received: from mail.example.com\n"
      "\tby relay.example.com; Thu, 22 Aug 2002\n"
      "From: =?iso-8859-1?Q?J=F6rg?= <joerg@example.com>\n"
      "To: a@example.org,\n"
      "  b@example.org\n"
      "Subject: Hello\n"
      "X-Mailer: Microsoft Outlook Express 6.00\n"
      "Content-Type: multipart/alternative;\n"
      "\tboundary=\"XX\"\n"
      "X-Spam-Flag: maybe\n"
      "\n"
      "--XX\n"
      "Content-Type: text/plain\n"
      "X-Mailer: inner part, not a top-level header\n"
      "\n"
      "Hi there.\n"
      "--XX--\n";
  std::string subject, body;
  std::vector<HeaderField> headers;
  parse_email(raw, subject, body, &headers);
  CHECK(subject == "Hello");
  CHECK(body == "Hi there.");  // the folded Content-Type still gives the boundary
  std::vector<std::string> names, values;
  for (const HeaderField& h : headers) {
    names.push_back(h.name);
    values.push_back(h.value);
  }
  CHECK(names == std::vector<std::string>{"return-path", "received", "from", "to", "subject", "x-mailer",
                                          "content-type", "x-spam-flag"});
  CHECK(values == std::vector<std::string>{
                      "<someone@example.com>", "from mail.example.com by relay.example.com; Thu, 22 Aug 2002",
                      "J\xC3\xB6rg <joerg@example.com>", "a@example.org, b@example.org", "Hello",
                      "Microsoft Outlook Express 6.00", "multipart/alternative; boundary=\"XX\"", "maybe"});
  // The transformer's tokens read the kept ones only.
  CHECK(is_kept_header("return-path"));
  CHECK(is_kept_header("x-mailer"));
  CHECK_FALSE(is_kept_header("received"));
  CHECK_FALSE(is_kept_header("x-spam-flag"));
  CHECK_FALSE(is_kept_header("subject"));

  // Text that only looks like a header block has no headers.
  parse_email("Note: call me\nBob", subject, body, &headers);
  CHECK(headers.empty());
  CHECK(body == "Note: call me\nBob");
}

TEST_CASE("spam corpus: clean_email turns HTML into text and decodes entities") {
  const std::string raw =
      "Subject: html\n"
      "Content-Type: text/html\n"
      "\n"
      "<html><head><style>p { color: red; }</style><script>var x = '<b>';</script></head>\n"
      "<body><!-- hidden <p>comment</p> --><p>Fish &amp; chips&nbsp;for &lt;2&gt; &#8364;5 &#x41;&quot;B&quot;</p>"
      "<p>F<b>RE</b>E\nnow</p><table><tr><td>a</td><td>b</td></tr></table>AT&T &bogus; 1 < 2</body></html>";
  std::string subject, body;
  parse_email(raw, subject, body);
  CHECK(subject == "html");
  CHECK(body ==
        "Fish & chips for <2> \xE2\x82\xAC"
        "5 A\"B\"\n\nFREE now\n\na b\n\nAT&T &bogus; 1 < 2");
}

TEST_CASE("spam corpus: clean_email keeps text parts of multipart mail, prefers plain text, drops attachments") {
  const std::string raw =
      "Subject: parts\n"
      "MIME-Version: 1.0\n"
      "Content-Type: multipart/mixed; boundary=\"outer\"\n"
      "\n"
      "This is a multi-part message in MIME format.\n"
      "--outer\n"
      "Content-Type: multipart/alternative; boundary=inner\n"
      "\n"
      "--inner\n"
      "Content-Type: text/plain\n"
      "\n"
      "plain version\n"
      "--inner\n"
      "Content-Type: text/html\n"
      "\n"
      "<p>html version</p>\n"
      "--inner--\n"
      "--outer\n"
      "Content-Type: text/plain; charset=utf-8\n"
      "Content-Transfer-Encoding: base64\n"
      "\n"
      "c2Vjb25kIHBhcnQg\n"
      "w7xiZXI=\n"
      "--outer\n"
      "Content-Type: application/octet-stream; name=\"x.bin\"\n"
      "Content-Transfer-Encoding: base64\n"
      "\n"
      "QUJDREVGR0g=\n"
      "--outer\n"
      "Content-Type: text/plain\n"
      "Content-Disposition: attachment; filename=\"notes.txt\"\n"
      "\n"
      "attached notes\n"
      "--outer--\n"
      "epilogue\n";
  std::string subject, body;
  parse_email(raw, subject, body);
  CHECK(subject == "parts");
  CHECK(body ==
        "plain version\n\nsecond part \xC3\xBC"
        "ber");

  // An HTML-only alternative is used when there is no plain part.
  const std::string html_only =
      "Content-Type: multipart/alternative; boundary=b\n\n--b\nContent-Type: text/html\n\n<b>only</b> html\n--b--\n";
  CHECK(clean_email(html_only) == "\nonly html");

  // Parts are found even when the message lost its Content-Type header.
  const std::string headless =
      "Subject: s\nMIME-Version: 1.0\n\nThis is a MIME Message\n\n--xyz\nContent-Type: text/html\n"
      "Content-Transfer-Encoding: quoted-printable\n\n<p>price=3D0</p>\n--xyz--\n";
  CHECK(clean_email(headless) == "s\nprice=0");
}

TEST_CASE("spam corpus: clean_email reads text without headers as a body and never outputs invalid UTF-8") {
  CHECK(clean_email("Hello   there,\n\n\n\nfriend  ") == "\nHello there,\n\nfriend");
  CHECK(clean_email("Note: call me\nBob") == "\nNote: call me\nBob");
  CHECK(clean_email("Subject: only a subject") == "only a subject\n");
  std::string subject, body;
  // A Latin-1 e-acute byte, a Windows-1252 right quote and a NUL.
  parse_email(std::string("Subject: caf\xE9\n\nit\x92s\0 ok", 23), subject, body);
  CHECK(subject == "caf\xC3\xA9");
  CHECK(body == "it\xE2\x80\x99s ok");
  CHECK(clean_email("").size() == 1);
}

TEST_CASE("spam corpus: control characters are dropped whether raw, UTF-8 encoded or written as HTML entities") {
  // C0 controls (but tab and newline), DEL and the C1 block, as numeric entities in HTML ...
  const std::string html = "Content-Type: text/html\n\n<p>a&#x14;b&#27;c&#127;d&#x85;e&#x9F;f&#9;g&#xA0;h&#x2026;i</p>";
  CHECK(clean_email(html) == "\nabcdef g h\xE2\x80\xA6i");
  // ... and as raw bytes: DEL, and U+0085 validly encoded (C2 85); a lone 0x85 byte is Windows-1252's
  // ellipsis, as every other invalid byte is read.
  CHECK(clean_email(std::string("x\x7Fy\xC2\x85z\x85w")) == "\nxyz\xE2\x80\xA6w");
}

// ---------------------------------------------------------------- corpus

TEST_CASE("spam corpus: load_spam_corpus reads the committed sample") {
  const std::vector<Email> emails = load_spam_corpus(kSampleDir);
  // The expected counts are the files on disk, and the sample's README states them.
  std::map<std::string, int> files;
  for (const auto& group : fs::directory_iterator(kSampleDir))
    if (group.is_directory())
      files[group.path().filename().string()] =
          static_cast<int>(std::distance(fs::directory_iterator(group.path()), fs::directory_iterator()));
  std::map<std::string, int> loaded;
  int spam = 0;
  for (const Email& e : emails) {
    loaded[e.group] += 1;
    spam += e.spam;
    CHECK(e.spam == (e.group.rfind("spam", 0) == 0));
  }
  CHECK(loaded == files);
  CHECK(emails.size() == 35);
  CHECK(spam == 15);
  CHECK(loaded["easy-ham-1"] == 8);
  CHECK(loaded["spam-2"] == 8);
  CHECK(std::is_sorted(emails.begin(), emails.end(), [](const Email& a, const Email& b) {
    return a.group != b.group ? a.group < b.group : a.id < b.id;
  }));

  for (const Email& e : emails) {
    INFO(e.group << "/" << e.id);
    CHECK_FALSE(e.subject.empty());
    CHECK_FALSE(contains(e.body, "Return-Path:"));
    CHECK_FALSE(contains(e.body, "Delivered-To:"));
    CHECK_FALSE(contains(e.body, "Content-Transfer-Encoding"));
    CHECK_FALSE(contains(e.body, "=3D"));
    CHECK_FALSE(contains(e.body, "<td"));
    CHECK_FALSE(contains(e.body, "<TD"));
    CHECK_FALSE(contains(e.body, "&nbsp;"));
  }

  const Email* qp_html = find_email(emails, "spam-1", "00266.");
  REQUIRE(qp_html != nullptr);
  CHECK(qp_html->subject == "MSNBC: Rates Hit 35 year Low 4.75% ...12021");
  // "Lowest =\nRates" is a quoted-printable soft break inside HTML, "YOU</FONT>...R RATE" a word cut by tags.
  CHECK(contains(qp_html->body, "Take Advantage of the Lowest Rates In Decades!"));
  CHECK(contains(qp_html->body, "LOWER YOUR PAYMENT AND LOWER YOUR RATE!!!"));
  CHECK(contains(qp_html->text(), "MSNBC"));

  const Email* encoded_subject = find_email(emails, "easy-ham-1", "02434.");
  REQUIRE(encoded_subject != nullptr);
  CHECK(encoded_subject->subject ==
        "Re: RE: [zzzzteana] Sitting Bull \xC3\xBC"
        "ber alles [Long]");

  const Email* cp1252_subject = find_email(emails, "hard-ham-1", "00149.");
  REQUIRE(cp1252_subject != nullptr);
  CHECK(cp1252_subject->subject == "Matrox Parhelia\xE2\x84\xA2 now available");

  // A signed message: the text part is kept, the base64 signature attachment dropped.
  const Email* signed_mail = find_email(emails, "hard-ham-1", "00183.");
  REQUIRE(signed_mail != nullptr);
  CHECK_FALSE(signed_mail->body.empty());
  CHECK_FALSE(has_base64_line(signed_mail->body));
}

TEST_CASE("spam corpus: read_email_file reads a corpus JSON file or a raw mail file") {
  const fs::path sample = fs::path(kSampleDir) / "spam-1" / "00266.3cf1dcf8df07100b1530493e11f80a25.json";
  const Email from_json = read_email_file(sample.string());
  CHECK(from_json.group == "spam-1");
  CHECK(from_json.spam);
  CHECK(from_json.id == "00266.3cf1dcf8df07100b1530493e11f80a25");
  CHECK(contains(from_json.body, "Refinance"));

  TempDir dir;
  const std::string raw = dir.file("message.eml");
  write_text(raw, "Subject: lunch?\r\nFrom: a@b.c\r\n\r\nNoon at the usual place.\r\n");
  const Email mail = read_email_file(raw);
  CHECK(mail.subject == "lunch?");
  CHECK(mail.body == "Noon at the usual place.");
  CHECK(mail.group.empty());

  CHECK_THROWS_WITH_AS(read_email_file(dir.file("none.eml")), doctest::Contains("none.eml"), IoError);
  const std::string bad = dir.file("bad.json");
  write_text(bad, R"({"id": "1", "group": "spam-1"})");
  CHECK_THROWS_WITH_AS(read_email_file(bad), doctest::Contains("field 'text' is missing"), ValueError);
  // A directory or an empty message is an error, not an email with no words.
  CHECK_THROWS_WITH_AS(read_email_file(dir.path.string()), doctest::Contains("is a directory, not a file"), IoError);
  const std::string empty = dir.file("empty.eml");
  write_text(empty, " \r\n\n");
  const std::string empty_message = "read_email_file: '" + empty + "' is empty (4 bytes of white space)";
  CHECK_THROWS_WITH_AS(read_email_file(empty), empty_message.c_str(), ValueError);

  // A corpus file in a folder that says neither spam nor ham is refused, not counted as ham.
  const std::string stray = dir.file("stray.json");
  write_text(stray, R"({"group": "newsletters", "text": "Subject: hi\n\nhello"})");
  CHECK_THROWS_WITH_AS(read_email_file(stray),
                       doctest::Contains("group \"newsletters\" is neither spam (a name starting with \"spam\")"),
                       ValueError);
  // The folder names the group when the file does not.
  fs::create_directories(dir.path / "corpus" / "misc");
  write_text((dir.path / "corpus" / "misc" / "a.json").string(), R"({"text": "Subject: hi\n\nhello"})");
  CHECK_THROWS_WITH_AS(load_spam_corpus((dir.path / "corpus").string()),
                       doctest::Contains("a.json': group \"misc\" is neither spam"), ValueError);

  // Only the head of a large raw file is read when asked; the email says it was cut.
  const std::string large = dir.file("large.eml");
  write_text(large, "Subject: big\n\n" + std::string(5000, 'w') + " tail");
  const Email head = read_email_file(large, 1000);
  CHECK(head.truncated);
  CHECK(head.body.size() < 1000);
  CHECK_FALSE(read_email_file(raw, 1000).truncated);
}

TEST_CASE("spam corpus: a missing corpus says how to fetch it, TAPEGRAD_DATA moves the default folder") {
  TempDir dir;
  const std::string missing = dir.file("spam-assassin");
  CHECK_THROWS_WITH_AS(load_spam_corpus(missing), doctest::Contains("run scripts/fetch-spam-corpus.sh"), IoError);
  CHECK_THROWS_WITH_AS(load_spam_corpus(missing), doctest::Contains(missing.c_str()), IoError);
  // A folder without emails is as good as missing.
  CHECK_THROWS_WITH_AS(load_spam_corpus(dir.path.string()), doctest::Contains("fetch-spam-corpus.sh"), IoError);

  const char* old = std::getenv("TAPEGRAD_DATA");
  const std::string saved = old ? old : "";
  ::setenv("TAPEGRAD_DATA", dir.path.c_str(), 1);
  CHECK(default_spam_corpus_dir() == (dir.path / "spam-assassin").string());
  ::unsetenv("TAPEGRAD_DATA");
  CHECK(contains(default_spam_corpus_dir(), "data/corpora/spam-assassin"));
  if (old) ::setenv("TAPEGRAD_DATA", saved.c_str(), 1);
}
