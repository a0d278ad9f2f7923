// io: the JSON reader for untrusted text (depth limit, duplicate keys, numbers out of range,
// typed errors) and whole-file reads.

#include <doctest/doctest.h>
#include <sys/stat.h>

#include <string>

#include "tapegrad/autograd/error.h"
#include "tapegrad/io/file.h"
#include "tapegrad/io/json.h"
#include "tests/testing.h"

using namespace tapegrad;
using nlohmann::json;
using tapegrad::testing::TempDir;

TEST_CASE("json: parse_json reads ordinary JSON as nlohmann does") {
  const std::string text = R"({"a": [1, 2.5, "x", null, true], "b": {"c": {}}, "d": -3})";
  CHECK(io::parse_json(text, "t") == json::parse(text));
  CHECK(io::parse_json("[]", "t") == json::array());
  CHECK(io::parse_json(" 7 ", "t") == 7);
  // The same key in two different objects is fine.
  CHECK(io::parse_json(R"({"a": {"k": 1}, "b": {"k": 2}})", "t")["b"]["k"] == 2);
}

TEST_CASE("json: nesting deeper than the limit is refused before it is built") {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  CHECK_THROWS_WITH_AS(io::parse_json(deep, "deep.json"),
                       doctest::Contains("deep.json: JSON nested more than 64 levels deep (at ...[0][0]"), IoError);
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += "{\"a\":";
  CHECK_THROWS_WITH_AS(io::parse_json(objects, "o.json"), doctest::Contains("o.json: JSON nested more than 64"),
                       IoError);
  // Exactly at the limit is accepted, one more is not.
  const std::string at_limit = std::string(64, '[') + std::string(64, ']');
  CHECK(io::parse_json(at_limit, "t").is_array());
  CHECK_THROWS_AS(io::parse_json("[" + at_limit + "]", "t"), IoError);
  CHECK(io::parse_json("[[1]]", "t", 2).is_array());
  CHECK_THROWS_WITH_AS(io::parse_json("[[[1]]]", "t", 2), "t: JSON nested more than 2 levels deep (at [0][0])",
                       IoError);
}

TEST_CASE("json: a key given twice in one object is refused, at any depth, with its path") {
  CHECK_THROWS_WITH_AS(io::parse_json(R"({"a": 1, "a": 2})", "f.json"),
                       "f.json: duplicate key \"a\" in one object (at a)", IoError);
  CHECK_THROWS_WITH_AS(io::parse_json(R"({"x": [0, {"k": 1, "k": 2}]})", "f.json"),
                       "f.json: duplicate key \"k\" in one object (at x[1].k)", IoError);
}

TEST_CASE("json: numbers beyond a double and syntax errors are IoErrors naming the source and place") {
  CHECK_THROWS_WITH_AS(io::parse_json(R"({"lr": 1e400})", "c.json"), "c.json: number overflow parsing '1e400' (at lr)",
                       IoError);
  CHECK_THROWS_WITH_AS(io::parse_json(R"({"a": [1, 2, -1e999]})", "c.json"),
                       "c.json: number overflow parsing '-1e999' (at a[2])", IoError);
  CHECK_THROWS_WITH_AS(io::parse_json(R"({"a": )", "c.json"), doctest::Contains("c.json: not valid JSON: parse error"),
                       IoError);
  // A huge unterminated string: the message quotes at most a bounded piece of it.
  const std::string hostile = "[\"" + std::string(1 << 20, 'x');
  try {
    io::parse_json(hostile, "h.json");
    FAIL("no error");
  } catch (const IoError& e) {
    CHECK(std::string(e.what()).size() < 300);
  }
  // Integers beyond uint64 are read as doubles, as nlohmann does; they are in range.
  CHECK(io::parse_json("18446744073709551616", "t").is_number_float());
}

TEST_CASE("json: json_excerpt is short whatever the value") {
  CHECK(io::json_excerpt(json(3)) == "3");
  CHECK(io::json_excerpt(json("a\"b")) == "\"a\\\"b\"");
  CHECK(io::json_excerpt(json::parse(R"({"k": [1, 2]})")) == R"({"k":[1,2]})");
  json big = json::array();
  for (int i = 0; i < 100000; ++i) big.push_back(i);
  const std::string cut = io::json_excerpt(big, 40);
  CHECK(cut.size() == 40);
  CHECK(cut.substr(0, 8) == "[0,1,2,3");
  CHECK(cut.substr(37) == "...");
  // Deep values are rendered only as far as the budget: no recursion over the whole depth.
  json deep = json::array();
  for (int i = 0; i < 1000; ++i) {
    json outer = json::array();
    outer.push_back(std::move(deep));
    deep = std::move(outer);
  }
  CHECK(io::json_excerpt(deep, 20) == std::string(17, '[') + "...");
  // A cut inside a multi-byte character is replaced, not thrown.
  CHECK_NOTHROW(io::json_excerpt(json(std::string(100, '\xC3') + "\xA9"), 10));
}

TEST_CASE("json: read_file and read_json_file name the file and the reason") {
  TempDir dir;
  const std::string path = dir.file("a.json");
  testing::write_text(path, R"({"k": 1})");
  CHECK(io::read_file(path) == R"({"k": 1})");
  CHECK(io::read_json_file(path)["k"] == 1);
  CHECK(io::read_file(path, 4, io::Oversize::ReadHead) == R"({"k")");
  CHECK_THROWS_WITH_AS(io::read_file(path, 4),
                       ("cannot read " + path + ": the file is 8 bytes, more than the limit of 4").c_str(), IoError);
  CHECK_THROWS_WITH_AS(io::read_file(dir.str()),
                       ("cannot read " + dir.str() + ": it is a directory, not a file").c_str(), IoError);
  // A FIFO with no writer: refused at once (a blocking open would wait for a writer forever).
  const std::string fifo = dir.file("fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH_AS(io::read_file(fifo), ("cannot read " + fifo + ": not a regular file").c_str(), IoError);
  CHECK_THROWS_AS(io::read_json_file(fifo), IoError);
  CHECK_THROWS_WITH_AS(io::read_file(dir.file("absent")),
                       ("cannot open " + dir.file("absent") + ": No such file or directory").c_str(), IoError);
  testing::write_text(path, "{\"k\": 1, \"k\": 2}");
  CHECK_THROWS_WITH_AS(io::read_json_file(path), (path + ": duplicate key \"k\" in one object (at k)").c_str(),
                       IoError);
}
