#include "service/api/json_writer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

namespace tfslurm::api {
namespace {

using nlohmann::json;

TEST(JsonWriterTest, NestsWithCommasWhereJsonWantsThem) {
  JsonWriter w;
  w.BeginObject().Field("a", 1).Key("b").BeginArray().Int(2).Null().BeginObject().EndObject();
  w.BeginArray().EndArray().EndArray().Field("c", std::string("x")).Key("d").Raw("{\"e\":[1]}");
  w.Key("f").Double(0.25).EndObject();
  std::string text = w.Take();
  EXPECT_EQ(text, R"({"a":1,"b":[2,null,{},[]],"c":"x","d":{"e":[1]},"f":0.25})");
  EXPECT_EQ(json::parse(text)["d"]["e"][0], 1);
}

TEST(JsonWriterTest, BooleansAreJsonBooleansNotNumbers) {
  JsonWriter w;
  w.BeginObject().Field("yes", true).Field("no", false).Field("n", 1).EndObject();
  std::string text = w.Take();
  EXPECT_EQ(text, R"({"yes":true,"no":false,"n":1})");
  EXPECT_TRUE(json::parse(text)["yes"].is_boolean());
}

TEST(JsonWriterTest, EscapesControlCharactersQuotesAndBackslashes) {
  std::string nasty = "q\"b\\n\n\r\t\x01\x1f\x7f end";
  JsonWriter w;
  w.String(nasty);
  EXPECT_EQ(json::parse(w.Take()).get<std::string>(), nasty);
}

TEST(JsonWriterTest, KeepsValidUtf8AndReplacesInvalidBytesLikeNlohmann) {
  std::vector<std::string> cases = {
      "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80",  // é € 😀
      "\xFF",
      "\xC0\xAF",          // invalid byte, overlong '/'
      "\xED\xA0\x80",      // a UTF-16 surrogate
      "\xF4\x90\x80\x80",  // above U+10FFFF
      // Truncated sequences, at the end and before an ASCII byte.
      "\xE2\x82",
      "\xE2\x82"
      "a",
      "\xF0\x9F\x98",
      "\xC3",
  };
  for (const std::string& s : cases) {
    JsonWriter w;
    w.String(s);
    std::string ours = w.Take();
    std::string theirs = json(s).dump(-1, ' ', false, json::error_handler_t::replace);
    EXPECT_EQ(json::parse(ours), json::parse(theirs))
        << "input bytes: " << json(s).dump(-1, ' ', true, json::error_handler_t::replace);
  }
}

TEST(JsonWriterTest, RandomBytesGiveWhatNlohmannGives) {
  std::mt19937 rng(7);
  for (int i = 0; i < 5000; ++i) {
    std::string s(rng() % 24, '\0');
    // Mostly bytes >= 0x80, where UTF-8 decoding has its corner cases.
    for (char& c : s) c = static_cast<char>(rng() % 4 ? 0x80 + rng() % 0x80 : rng() % 0x80);
    JsonWriter w;
    w.BeginObject().Field("s", s).EndObject();
    std::string text = w.Take();
    ASSERT_TRUE(json::accept(text)) << text;
    json theirs = {{"s", s}};
    ASSERT_EQ(json::parse(text),
              json::parse(theirs.dump(-1, ' ', false, json::error_handler_t::replace)))
        << theirs.dump(-1, ' ', true, json::error_handler_t::replace);
  }
}

TEST(JsonWriterTest, NonFiniteDoublesAreNull) {
  JsonWriter w;
  w.BeginArray().Double(std::nan("")).Double(1.5).EndArray();
  EXPECT_EQ(w.Take(), "[null,1.5]");
}

}  // namespace
}  // namespace tfslurm::api
