"""What every test suite shares: the stream parser, upstream builders, the
catalog, a fake OpenAI-compatible provider."""
