package ai.arbor.task;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;

/**
 * {@code kb}: two-hop questions over a generated knowledge base of people, cities and organisations,
 * answerable only by searching it (two searches each). The knowledge base is invented from a seed
 * (syllable names), so nothing about it can be known in advance or downloaded.
 *
 * <p>Facts: a person is employed by an organisation and was born in a city; an organisation was founded
 * by a person and is based in a city. One document per entity states its facts (title = the entity's
 * name), always in the same layout:
 * <pre>{@code Zuga Nosi is employed by Duma Corp. Zuga Nosi was born in Bumak.
 * Duma Corp was founded by Lati Veso. Duma Corp is based in Kirol.
 * Bumak is a city.}</pre>
 * Question templates, each ending with the name to search first and needing the first hop's answer as
 * the second search:
 * <ul>
 *   <li>City of the employer of P? (P → org → its city)
 *   <li>Founder of the employer of P? (P → org → its founder)
 *   <li>Birthplace of the founder of O? (O → founder → his city)
 * </ul>
 * The held-out split asks about people and organisations that no training question mentions.
 *
 * <p>Why fixed lengths: the character-level policy must copy three names — the question's name into the
 * first search, the second-hop name from the first result into the second search, the answer from the
 * second result — and it copies by attending a fixed distance back (see {@link ArithTask}). So every
 * person is two 4-letter consonant–vowel words ({@value #NAME_CHARS} characters, {@code Zuga Nosi}),
 * every organisation one such word plus {@code " Corp"} (also {@value #NAME_CHARS}), every city one
 * 5-letter word ({@code Bumak}); every question ends with its name and {@code "?"}; the two relation
 * phrases of a document have equal lengths across entity types ({@code " is employed by "} /
 * {@code " was founded by "}, {@code " was born in "} / {@code " is based in "}), so the second-hop name
 * sits at one offset of every result and the answer at one of two (a founder's or a city's slot, chosen by
 * the question's first word). The search returns one hit, so the layout of a result never varies. With
 * variable-length names (1–2 syllables plus an optional "n", first names of any length) the policy
 * answered none of the held-out questions after 1000 SFT steps (measured): it searched for names of the
 * question's shape but with the wrong letters. With these shapes it answered 0.195 of 200 (greedy, seed 1;
 * 138 first searches right, 110 second searches right): the residual copy errors are almost all the last
 * letter of a 4-letter word, and it answered no city question (it guessed a city instead of copying the
 * second slot), only founder questions (37 of 93). Moving every answer into the founder slot (asking for a
 * founder's employer instead of cities) scored 0.000 in one run, so that is not the fix by itself.
 */
public final class KbTask {
    /** A corpus document. */
    public record Doc(String id, String title, String text) {}

    /** Characters of every person and organisation name. */
    static final int NAME_CHARS = 9;
    /** Characters of every city name. */
    static final int CITY_CHARS = 5;

    private static final String CONSONANTS = "bdfghklmnprstvz";
    private static final String VOWELS = "aeiou";
    /** A city's last letter: no "s", which the search's stemmer would strip ("Bumas" would match "Buma"). */
    private static final String CITY_ENDS = "bdfgklmnprtz";
    /** Distinct 4-letter words ({@code cvcv}). */
    private static final int WORDS = (int) Math.pow(CONSONANTS.length() * VOWELS.length(), 2);

    private final List<Doc> corpus = new ArrayList<>();
    private final List<Problem> train = new ArrayList<>();
    private final List<Problem> heldOut = new ArrayList<>();

    public KbTask(long seed, int trainSize, int heldOutSize) {
        if (trainSize < 0 || heldOutSize < 0) throw new IllegalArgumentException("split sizes must be >= 0, got " + trainSize + ", " + heldOutSize);
        int nOrgs = Math.max(8, (trainSize + heldOutSize) / 6), nPeople = 4 * nOrgs, nCities = Math.max(6, nOrgs / 2);
        // organisation words are reserved (no person uses them) so that a search for "Duma Corp" finds the
        // organisation; half the words stay for people
        if (nOrgs > WORDS / 2)
            throw new IllegalArgumentException("kb supports at most " + 6 * (WORDS / 2) + " problems in all, got " + (trainSize + heldOutSize));
        Random rnd = new Random(seed);
        Set<String> used = new HashSet<>();
        List<String> cities = new ArrayList<>();
        while (cities.size() < nCities) {
            String c = capitalise(word(rnd) + CITY_ENDS.charAt(rnd.nextInt(CITY_ENDS.length())));
            if (used.add(c)) cities.add(c);
        }
        List<String> orgs = new ArrayList<>();
        while (orgs.size() < nOrgs) {
            String w = capitalise(word(rnd));
            if (used.add(w)) orgs.add(w + " Corp");
        }
        List<String> people = new ArrayList<>();
        while (people.size() < nPeople) {
            String first = capitalise(word(rnd)), last = capitalise(word(rnd));
            // BM25 ignores word order: "Nosi Zuga" would tie with "Zuga Nosi"
            if (first.equals(last) || used.contains(first) || used.contains(last) || used.contains(last + " " + first)) continue;
            if (used.add(first + " " + last)) people.add(first + " " + last);
        }
        Map<String, String> employer = new LinkedHashMap<>(), birthplace = new LinkedHashMap<>();
        Map<String, String> hq = new LinkedHashMap<>(), founder = new LinkedHashMap<>();
        for (String o : orgs) {
            hq.put(o, cities.get(rnd.nextInt(cities.size())));
            founder.put(o, people.get(rnd.nextInt(people.size())));
        }
        for (String p : people) {
            employer.put(p, orgs.get(rnd.nextInt(orgs.size())));
            birthplace.put(p, cities.get(rnd.nextInt(cities.size())));
        }
        for (String p : people)
            corpus.add(new Doc("p" + corpus.size(), p, p + " is employed by " + employer.get(p) + ". " + p + " was born in " + birthplace.get(p) + "."));
        for (String o : orgs)
            corpus.add(new Doc("o" + corpus.size(), o, o + " was founded by " + founder.get(o) + ". " + o + " is based in " + hq.get(o) + "."));
        for (String c : cities) corpus.add(new Doc("c" + corpus.size(), c, c + " is a city."));

        // held-out questions come from the last quarter of people and organisations, train from the rest
        int pCut = people.size() * 3 / 4, oCut = orgs.size() * 3 / 4;
        List<Problem> pool = new ArrayList<>();
        for (int i = 0; i < people.size(); i++) {
            String p = people.get(i), o = employer.get(p);
            boolean test = i >= pCut;
            pool.add(problem(test, "City of the employer of " + p + "?", hq.get(o), p, o));
            pool.add(problem(test, "Founder of the employer of " + p + "?", founder.get(o), p, o));
        }
        for (int i = 0; i < orgs.size(); i++) {
            String o = orgs.get(i), f = founder.get(o);
            pool.add(problem(i >= oCut, "Birthplace of the founder of " + o + "?", birthplace.get(f), o, f));
        }
        java.util.Collections.shuffle(pool, rnd);
        for (Problem p : pool) {
            boolean test = p.id().startsWith("test");
            if (test && heldOut.size() < heldOutSize) heldOut.add(renumber(p, "kb-test-" + heldOut.size()));
            else if (!test && train.size() < trainSize) train.add(renumber(p, "kb-train-" + train.size()));
        }
        if (train.size() < trainSize || heldOut.size() < heldOutSize)
            throw new IllegalStateException("knowledge base too small for the requested splits");
    }

    private static Problem problem(boolean test, String question, String answer, String hop1, String hop2) {
        return new Problem(test ? "test" : "train", question, List.of(answer),
                List.of(new Problem.ToolStep("search", hop1), new Problem.ToolStep("search", hop2)));
    }

    private static Problem renumber(Problem p, String id) {
        return new Problem(id, p.question(), p.answers(), p.plan());
    }

    public List<Doc> corpus() {
        return corpus;
    }

    public List<Problem> train() {
        return train;
    }

    public List<Problem> heldOut() {
        return heldOut;
    }

    /** A 4-letter consonant–vowel word, lower case. */
    private static String word(Random rnd) {
        StringBuilder sb = new StringBuilder(4);
        for (int s = 0; s < 2; s++)
            sb.append(CONSONANTS.charAt(rnd.nextInt(CONSONANTS.length()))).append(VOWELS.charAt(rnd.nextInt(VOWELS.length())));
        return sb.toString();
    }

    private static String capitalise(String s) {
        return Character.toUpperCase(s.charAt(0)) + s.substring(1);
    }
}
